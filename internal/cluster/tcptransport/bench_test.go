package tcptransport_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/faultproxy"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// BenchmarkProposeTCP: multiraft's BenchmarkPropose over real loopback TCP instead of the
// in-memory network: three hosts on their own Run goroutines ticking every 10ms, n1
// leading every group, 64 proposers spread round-robin over the groups, each Propose
// waiting for commit and apply; sync=1ms makes every Engine.Sync cost a millisecond. The
// two benchmarks side by side are the transport's cost.
//
//	go test -run '^$' -bench ProposeTCP -benchtime 20000x ./internal/cluster/tcptransport/
func BenchmarkProposeTCP(b *testing.B) {
	for _, groups := range []int{1, 100} {
		for _, sync := range []time.Duration{0, time.Millisecond} {
			b.Run(fmt.Sprintf("groups=%d/sync=%v", groups, sync), func(b *testing.B) {
				benchPropose(b, groups, sync)
			})
		}
	}
}

func benchPropose(b *testing.B, groups int, syncDelay time.Duration) {
	c := newCluster(b, opts{nodes: 3, groups: groups})
	for _, n := range c.nodes {
		n.eng.SyncDelay = syncDelay
	}
	for _, g := range c.groupIDs() {
		if err := c.nodes[1].host.Campaign(g); err != nil {
			b.Fatal(err)
		}
	}
	c.leaders([]multiraft.NodeID{1}, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data := make([]byte, 100)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	before := c.nodes[1].tr.Stats()
	b.ResetTimer()
	start := time.Now()
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				g := multiraft.GroupID(1 + (int(i)+w)%groups)
				if _, err := c.nodes[1].host.Propose(ctx, g, data); err != nil {
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
	after := c.nodes[1].tr.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	if w := after.Writes - before.Writes; w > 0 {
		b.ReportMetric(float64(after.BatchesSent-before.BatchesSent)/float64(w), "batches/write")
		b.ReportMetric(float64(after.BytesSent-before.BytesSent)/float64(b.N), "leader-bytes/proposal")
	}
}

// BenchmarkFailoverTCP: the leader's node is cut away through the proxies (connections
// closed and refused) and the op is the time until the other two commit a proposal; then
// the cut heals and the cluster converges before the next op. Three hosts over loopback
// TCP with 10 ms ticks; before each cut the group has sat idle long enough to quiesce, so
// the followers learn of the loss from the node-pair liveness beat over TCP.
//
//	go test -run '^$' -bench FailoverTCP -benchtime 20x ./internal/cluster/tcptransport/
func BenchmarkFailoverTCP(b *testing.B) {
	const tick = 10 * time.Millisecond
	c := newCluster(b, opts{nodes: 3, groups: 1, proxies: true, tick: tick})
	var took []time.Duration
	for i := range b.N {
		lead := c.leaders(c.ids, 10*time.Second)[1]
		c.propose(1, fmt.Sprintf("warm-%d", i), []multiraft.NodeID{lead}, 10*time.Second)
		c.converged(10 * time.Second)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(tick) { // idle: it quiesces
			if st, _ := c.nodes[lead].host.Status(1); st.Quiesced {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the idle group did not quiesce in 10s")
			}
		}
		var rest []multiraft.NodeID
		for _, id := range c.ids {
			if id != lead {
				rest = append(rest, id)
			}
		}
		start := time.Now()
		c.isolate(lead, faultproxy.Cut)
		c.propose(1, fmt.Sprintf("after-%d", i), rest, 30*time.Second)
		took = append(took, time.Since(start))
		c.isolate(lead, faultproxy.Pass)
		c.converged(10 * time.Second)
	}
	b.StopTimer()
	slices.Sort(took)
	q := func(p float64) time.Duration { return took[min(len(took)-1, int(p*float64(len(took))))] }
	b.ReportMetric(float64(q(0.5))/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(q(0.99))/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(float64(took[len(took)-1])/float64(tick), "max-ticks")
	b.ReportMetric(float64(q(0.5))/float64(tick), "p50-ticks")
}
