package replpart

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// BenchmarkAppend: Appends of one 1 KiB batch through one replicated partition on three
// hosts over the live in-memory network, each host on its own Run goroutine ticking every
// 10 ms, n1 leading; every Engine.Sync sleeps 1 ms (an fdatasync's cost), the local log is
// the in-memory fake. Each Append returns after commit and apply on the leader.
//
//	go test -run '^$' -bench Append -benchtime 5000x ./internal/cluster/replpart/
func BenchmarkAppend(b *testing.B) {
	for _, workers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchAppend(b, workers) })
	}
}

func benchAppend(b *testing.B, workers int) {
	ids := []multiraft.NodeID{1, 2, 3}
	net := memnet.NewLive(1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var hosts []*multiraft.Host
	var parts []*Partition
	for _, id := range ids {
		eng := multiraft.NewMemEngine()
		eng.SyncDelay = time.Millisecond
		h, err := multiraft.New(multiraft.Config{Node: id, Peers: ids, Engine: eng, Transport: net.Transport(id)})
		if err != nil {
			b.Fatal(err)
		}
		sm := NewMachine(id, &fakeLog{})
		if err := h.CreateGroup(testGroup, ids, sm); err != nil {
			b.Fatal(err)
		}
		net.Attach(id, h)
		hosts, parts = append(hosts, h), append(parts, NewPartition(h, testGroup, sm))
		t := multiraft.NewTimeTicker(10 * time.Millisecond)
		wg.Add(1)
		go func() { defer wg.Done(); defer t.Stop(); _ = h.Run(ctx, t) }()
	}
	defer func() {
		cancel()
		for _, h := range hosts {
			h.Close()
		}
		wg.Wait()
	}()
	if err := hosts[0].Campaign(testGroup); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if l, _ := parts[0].Leader(); l == 1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("no leader in 10s")
		}
	}
	batch := [][]byte{make([]byte, 1024)} // no ':': the fake log does no dedup scan
	var next, failed atomic.Int64
	lat := make([][]time.Duration, workers)
	before := hosts[0].Stats()
	b.ResetTimer()
	start := time.Now()
	var ww sync.WaitGroup
	for w := range workers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := parts[0].Append(ctx, batch); err != nil {
					failed.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	ww.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d appends failed", f)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	after := hosts[0].Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	if syncs := after.Syncs - before.Syncs; syncs > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs), "appends/sync")
	}
}
