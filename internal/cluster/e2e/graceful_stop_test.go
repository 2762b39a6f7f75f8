package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestGracefulStopHandsLeadershipOver: three nodes under an idempotent acks=all producer;
// the leader of partition 0 is stopped with SIGTERM and started again, SLUICE_CLUSTER_STOPS
// times (CI: 2). Each stop hands every group the node leads to another replica before its
// listeners close (its log says so, before "shutdown complete", with none kept), the
// producer goes on with no error, and every acknowledged record is in its partition in
// order. The stall (SIGTERM to the answer of the first produce call made after it) is
// logged beside what the same step costs after a SIGKILL (TestLeaderKilledUnderLoad).
func TestGracefulStopHandsLeadershipOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	stops := envInt("SLUICE_CLUSTER_STOPS", 2)
	lc, cancel := startLoadedCluster(t, "graceful", stops)
	defer cancel()
	c, ctx, op, topic, parts := lc.cluster, lc.ctx, lc.op, lc.topic, int32(3)

	var stalls []time.Duration
	for round := range stops {
		time.Sleep(time.Second)
		leader := lc.leaderOfFirst(t)
		proc := c.procs[leader-1]
		signalled := time.Now()
		proc.Stop() // SIGTERM; fails the test unless it exits 0
		stalls = append(stalls, op.answeredSince(ctx, signalled))
		logs := proc.Logs()
		handed := strings.Index(logs, "cluster: stopping: leadership handed over")
		done := strings.Index(logs, "shutdown complete")
		switch {
		case handed < 0 || done < 0 || handed > done:
			t.Fatalf("round %d: node %d's stop did not hand its leadership over before shutting down (handed at %d, complete at %d):\n%s",
				round, leader, handed, done, proc.Problems(40))
		case strings.Contains(logs, "stopping with groups still led here"):
			t.Fatalf("round %d: node %d kept groups it led:\n%s", round, leader, proc.Problems(40))
		}
		line := logs[handed:]
		line = line[:strings.IndexByte(line+"\n", '\n')]
		t.Logf("round %d: stopped node %d (leader of %s/0) with SIGTERM; producing again after %v (its log: %s)", round, leader, topic, stalls[round], line)
		c.start(leader)
		c.procs[leader-1].Addr("kafka")
	}
	time.Sleep(time.Second)
	acked := op.finish()
	if ctx.Err() != nil {
		t.Fatalf("ran out of time: %v (acknowledged %d)", ctx.Err(), op.ackedN.Load())
	}
	t.Logf("acknowledged %d records, %d produce errors; SIGTERM to the answer of the first produce call made after it: %v",
		op.ackedN.Load(), op.failed.Load(), summarize(stalls))
	if n := op.failed.Load(); n != 0 {
		t.Errorf("%d records failed across graceful stops", n)
	}
	checkPartitions(ctx, t, c, topic, acked)
	checkReplicasAgree(ctx, t, c, topic, parts)
}
