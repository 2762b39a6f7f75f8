package multiraft_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// BenchmarkPropose: proposals through three hosts on the live in-memory network, each
// host on its own Run goroutine ticking every 10ms, n1 leading every group; 64 proposers
// spread round-robin over the groups, each Propose waiting for commit and apply. sync=1ms
// makes every Engine.Sync cost a millisecond, standing for an fdatasync, which is where
// group commit across groups shows (readys/sync).
//
//	go test -run '^$' -bench Propose -benchtime 20000x ./internal/cluster/multiraft/
func BenchmarkPropose(b *testing.B) {
	for _, groups := range []int{1, 100} {
		for _, sync := range []time.Duration{0, time.Millisecond} {
			b.Run(fmt.Sprintf("groups=%d/sync=%v", groups, sync), func(b *testing.B) {
				benchPropose(b, groups, sync)
			})
		}
	}
}

func benchPropose(b *testing.B, groups int, syncDelay time.Duration) {
	lc := newLiveCluster(b, 3, groups, 10*time.Millisecond, multiraft.Config{})
	for _, e := range lc.engs {
		e.SyncDelay = syncDelay
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data := make([]byte, 100)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	before := lc.hosts[0].Stats()
	b.ResetTimer()
	start := time.Now()
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				g := multiraft.GroupID(1 + (int(i)+w)%groups)
				if _, err := lc.hosts[0].Propose(ctx, g, data); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d proposals failed", f)
	}
	after := lc.hosts[0].Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	if syncs := after.Syncs - before.Syncs; syncs > 0 {
		b.ReportMetric(float64(after.Readys-before.Readys)/float64(syncs), "readys/sync")
		b.ReportMetric(float64(b.N)/float64(syncs), "proposals/sync")
	}
}

// BenchmarkIdleQuiesced: the cost of one tick of three hosts holding 1,000 quiesced groups
// (every group on every host, n1 leading all): group-ticks/op must be 0, and ns/op times
// ticks per second is the idle CPU (at 10 ticks/s, ns/op × 10 / 1e9 of one core).
// quiesce=false is the same idle cluster with quiescing disabled, for comparison.
//
//	go test -run '^$' -bench IdleQuiesced -benchtime 2000x ./internal/cluster/multiraft/
func BenchmarkIdleQuiesced(b *testing.B) {
	for _, off := range []bool{false, true} {
		b.Run(fmt.Sprintf("quiesce=%v", !off), func(b *testing.B) { benchIdle(b, off) })
	}
}

func benchIdle(b *testing.B, noQuiesce bool) {
	const groups = 1000
	heap0 := liveHeap()
	c := newCluster(b, 1, 3, multiraft.Config{DisableQuiesce: noQuiesce})
	for g := 1; g <= groups; g++ {
		c.createGroup(multiraft.GroupID(g), c.ids, c.ids)
		_ = c.nodes[1].host.Campaign(multiraft.GroupID(g))
	}
	for range 30 {
		c.tick()
	}
	for g := 1; g <= groups; g++ {
		for _, id := range c.ids {
			if st, _ := c.nodes[id].host.Status(multiraft.GroupID(g)); st.Quiesced == noQuiesce || st.Leader != 1 {
				b.Fatalf("group %d on n%d not quiesced under n1 after 30 ticks: %+v", g, id, st)
			}
		}
	}
	// what one replica of an idle group costs in memory: RawNode, in-memory log (a few
	// entries), the test state machine
	perReplica := float64(liveHeap()-heap0) / float64(3*groups)
	var before uint64
	for _, id := range c.ids {
		before += c.nodes[id].host.Stats().GroupTicks
	}
	msgs := c.net.Stats().Sent
	c.noChecks = true
	b.ResetTimer()
	for range b.N {
		c.tick()
	}
	b.StopTimer()
	var after uint64
	for _, id := range c.ids {
		after += c.nodes[id].host.Stats().GroupTicks
	}
	b.ReportMetric(float64(after-before)/float64(b.N), "group-ticks/op")
	b.ReportMetric(float64(c.net.Stats().Sent-msgs)/float64(b.N), "batches/op")
	b.ReportMetric(perReplica, "heap-B/replica")
}

// BenchmarkIdleCPU: three hosts on their own Run goroutines, ticking every 10ms (ten
// times the 100ms a deployment would use) or 100ms, holding 1,000 groups that went quiet: the
// process's CPU time (user+system, all three hosts together) over a wall-clock window,
// as a percentage of one core. One op is one 100ms window.
//
//	go test -run '^$' -bench IdleCPU -benchtime 20x ./internal/cluster/multiraft/
func BenchmarkIdleCPU(b *testing.B) {
	for _, tick := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond} {
		for _, off := range []bool{false, true} {
			b.Run(fmt.Sprintf("tick=%v/quiesce=%v", tick, !off), func(b *testing.B) { benchIdleCPU(b, tick, off) })
		}
	}
}

func benchIdleCPU(b *testing.B, tick time.Duration, off bool) {
	lc := newLiveCluster(b, 3, 1000, tick, multiraft.Config{DisableQuiesce: off})
	time.Sleep(20 * tick) // let every group quiesce
	t0, ticks0 := cpuTime(b), totalTicks(lc)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		time.Sleep(100 * time.Millisecond)
	}
	wall := time.Since(start)
	b.StopTimer()
	b.ReportMetric(100*float64(cpuTime(b)-t0)/float64(wall), "cpu-%")
	b.ReportMetric(float64(totalTicks(lc)-ticks0)/wall.Seconds(), "group-ticks/s")
}

func totalTicks(lc *liveCluster) uint64 {
	var n uint64
	for _, h := range lc.hosts {
		n += h.Stats().GroupTicks
	}
	return n
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
