package multiraft_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestLeaderFailover kills the leader of a three-voter group, again and again from fresh
// clusters, and measures the ticks until a survivor leads; every failover must finish
// within 150 ticks (split votes included). Quiesced: the group was idle, so only the
// node-pair liveness beat can notice (within NodeTimeoutTicks, 10), and the woken
// followers campaign within raft's random spread of what is left. Active: quiescing off,
// raft's own election timeout (10-19 ticks). The hosts are driven as Run drives them in
// production (a sleepy cluster: a host with no group awake sleeps to its next liveness
// beat or peer timeout, sleep.go). SLUICE_RAFT_FAILOVERS=N for more runs; the figures are
// in docs/cluster.md.
func TestLeaderFailover(t *testing.T) {
	runs := envInt("SLUICE_RAFT_FAILOVERS", 200)
	for _, quiesced := range []bool{true, false} {
		t.Run(fmt.Sprintf("quiesced=%v", quiesced), func(t *testing.T) {
			var ticks []int
			for i := range runs {
				ticks = append(ticks, failover(t, int64(i), quiesced))
			}
			slices.Sort(ticks)
			t.Logf("%d failovers: ticks p50 %d, p99 %d, max %d", runs, ticks[runs/2], ticks[runs*99/100], ticks[runs-1])
		})
	}
}

func failover(t *testing.T, seed int64, quiesced bool) int {
	c := newCluster(t, seed, 3, multiraft.Config{DisableQuiesce: !quiesced})
	c.sleepy = true
	c.createGroup(1, c.ids, c.ids)
	_ = c.nodes[1].host.Campaign(1)
	c.settle()
	for range 12 {
		c.tick()
	}
	if st, _ := c.nodes[2].host.Status(1); st.Quiesced != quiesced || st.Leader != 1 {
		t.Fatalf("seed %d: before the kill: %+v", seed, st)
	}
	c.kill(1)
	for n := 0; n <= 150; n++ {
		if l, _ := c.leader(1); l != 0 {
			return n
		}
		c.tick()
	}
	t.Fatalf("seed %d: no new leader 150 ticks after the leader died", seed)
	return 0
}
