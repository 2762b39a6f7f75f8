package multiraft_test

import (
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestQuiescedLeaderFailover kills the leader of a quiesced three-voter group, again and
// again from fresh clusters, and measures the ticks until a survivor leads: liveness
// notices within NodeTimeoutTicks (10) and the woken followers campaign within raft's
// randomised spread. Every failover must finish within 150 ticks (split votes included).
// SLUICE_RAFT_FAILOVERS=N for more runs; the figures are in docs/cluster.md.
func TestQuiescedLeaderFailover(t *testing.T) {
	runs := envInt("SLUICE_RAFT_FAILOVERS", 200)
	var ticks []int
	for i := range runs {
		c := newCluster(t, int64(i), 3, multiraft.Config{})
		c.createGroup(1, c.ids, c.ids)
		_ = c.nodes[1].host.Campaign(1)
		c.settle()
		for range 12 {
			c.tick()
		}
		if st, _ := c.nodes[2].host.Status(1); !st.Quiesced || st.Leader != 1 {
			t.Fatalf("run %d: not quiesced under n1 before the kill: %+v", i, st)
		}
		c.kill(1)
		n := 0
		for ; n <= 150; n++ {
			if l, _ := c.leader(1); l != 0 {
				break
			}
			c.tick()
		}
		if n > 150 {
			t.Fatalf("run %d: no new leader 150 ticks after the leader died", i)
		}
		ticks = append(ticks, n)
	}
	slices.Sort(ticks)
	t.Logf("%d failovers of a quiesced group: ticks p50 %d, p99 %d, max %d",
		runs, ticks[runs/2], ticks[runs*99/100], ticks[runs-1])
}
