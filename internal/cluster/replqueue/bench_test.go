package replqueue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// BenchmarkRoundTrip: send + receive + ack round trips through one replicated queue on
// three hosts over the live in-memory network, each host on its own Run goroutine ticking
// every 10 ms, n1 leading; every Engine.Sync sleeps 1 ms (an fdatasync's cost). Each
// worker sends a 1 KiB message, receives one and acks it; each call returns after commit.
//
//	go test -run '^$' -bench RoundTrip -benchtime 3000x ./internal/cluster/replqueue/
func BenchmarkRoundTrip(b *testing.B) {
	for _, workers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchRoundTrip(b, workers, false) })
	}
}

// BenchmarkFIFORoundTrip is RoundTrip on a FIFO queue: each worker Puts into its own
// message group with a fresh deduplication key and receives with a receive limit of 5.
//
//	go test -run '^$' -bench FIFORoundTrip -benchtime 3000x ./internal/cluster/replqueue/
func BenchmarkFIFORoundTrip(b *testing.B) {
	for _, workers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchRoundTrip(b, workers, true) })
	}
}

func benchRoundTrip(b *testing.B, workers int, fifo bool) {
	ids := []multiraft.NodeID{1, 2, 3}
	net := memnet.NewLive(1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var hosts []*multiraft.Host
	var queues []*Queue
	for _, id := range ids {
		eng := multiraft.NewMemEngine()
		eng.SyncDelay = time.Millisecond
		h, err := multiraft.New(multiraft.Config{Node: id, Peers: ids, Engine: eng, Transport: net.Transport(id)})
		if err != nil {
			b.Fatal(err)
		}
		sm, err := NewMachine(id, queue.Config{FIFO: fifo})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.CreateGroup(testGroup, ids, sm); err != nil {
			b.Fatal(err)
		}
		net.Attach(id, h)
		hosts, queues = append(hosts, h), append(queues, NewQueue(h, testGroup, sm, time.Now))
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
		if st, _ := hosts[0].Status(testGroup); st.Leader == 1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("no leader in 10s")
		}
	}
	q := queues[0]
	body := make([]byte, 1024)
	var next atomic.Int64
	var failed, empty atomic.Int64
	before := hosts[0].Stats()
	b.ResetTimer()
	start := time.Now()
	var ww sync.WaitGroup
	for w := range workers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				var err error
				if fifo {
					_, err = q.Put(ctx, []Msg{{Body: body, Group: fmt.Sprint("g", w), Key: fmt.Sprint("k", n)}}, 5*time.Minute)
				} else {
					_, err = q.Send(ctx, body, SendOptions{})
				}
				if err != nil {
					failed.Add(1)
					continue
				}
				var ds []Delivery
				if fifo {
					ds, _, err = q.ReceiveLimited(ctx, 1, time.Minute, 5)
				} else {
					ds, err = q.Receive(ctx, 1, 0)
				}
				if err != nil {
					failed.Add(1)
					continue
				}
				if len(ds) == 0 {
					empty.Add(1) // another worker took this one's message: it acks that
					continue
				}
				if err := q.Ack(ctx, ds[0].Receipt); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	ww.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d calls failed", f)
	}
	after := hosts[0].Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "roundtrips/s")
	if syncs := after.Syncs - before.Syncs; syncs > 0 {
		b.ReportMetric(float64(3*b.N)/float64(syncs), "commands/sync")
	}
	b.ReportMetric(float64(empty.Load()), "empty-receives")
}
