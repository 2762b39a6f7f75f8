package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLeaderKilledUnderLoad: three nodes, a topic with three partitions replicated on all
// of them, an idempotent franz-go producer with acks=all producing without pause, and the
// leader of partition 0 killed with SIGKILL and restarted, again and again. Afterwards
// every acknowledged record is in its partition, in the order it was produced; records
// produced but never acknowledged may be there too, and duplicates are counted (the
// idempotent producer should leave none). SLUICE_CLUSTER_KILLS sets the rounds (CI: 3).
func TestLeaderKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	kills := envInt("SLUICE_CLUSTER_KILLS", 3)
	lc, cancel := startLoadedCluster(t, "orders", kills)
	defer cancel()
	c, ctx, adm, op, topic, parts := lc.cluster, lc.ctx, lc.adm, lc.op, lc.topic, int32(3)

	var failovers []time.Duration
	for round := range kills {
		time.Sleep(time.Second)
		leader := lc.leaderOfFirst(t)
		c.kill(leader)
		killed := time.Now()
		failovers = append(failovers, op.answeredSince(ctx, killed))
		t.Logf("round %d: killed node %d (leader of %s/0); producing again after %v", round, leader, topic, failovers[round])
		time.Sleep(500 * time.Millisecond)
		c.start(leader)
		c.procs[leader-1].Addr("kafka")
	}
	time.Sleep(time.Second)
	acked := op.finish()
	if ctx.Err() != nil {
		t.Fatalf("ran out of time: %v (acknowledged %d)", ctx.Err(), op.ackedN.Load())
	}
	t.Logf("acknowledged %d records, %d produce errors; failover (kill to the answer of the first produce call made after it, every partition): %v",
		op.ackedN.Load(), op.failed.Load(), summarize(failovers))
	checkPartitions(ctx, t, c, topic, acked)
	checkLeadersSpread(ctx, t, c, adm, topic, parts)
	checkReplicasAgree(ctx, t, c, topic, parts)
}

// checkLeadersSpread: once every node is back, each partition's leadership returns to its
// preferred replica, so the three partitions are led by three different nodes again.
func checkLeadersSpread(ctx context.Context, t *testing.T, c *cluster, adm *kadm.Client, topic string, parts int32) {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	var leaders map[int]bool
	for time.Now().Before(deadline) {
		leaders = map[int]bool{}
		for p := range parts {
			leaders[c.leaderOf(ctx, adm, topic, p)] = true
		}
		if len(leaders) == int(parts) && !leaders[0] {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("leaders of %s's %d partitions after the restarts: %v, want %d different nodes", topic, parts, leaders, parts)
}

func createTopic(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, parts int32, rf int16) {
	t.Helper()
	for {
		resp, err := adm.CreateTopic(ctx, parts, rf, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic: %v", err)
		}
		t.Logf("create topic: %v; retrying", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPartitions reads every partition from the start and checks the acknowledged
// values are all there, in order.
func checkPartitions(ctx context.Context, t *testing.T, c *cluster, topic string, acked [][]int) {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range acked {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	got := make([][]int, len(acked))
	want := map[int32]map[int]bool{}
	missing := 0
	for p, vs := range acked {
		want[int32(p)] = map[int]bool{}
		for _, v := range vs {
			want[int32(p)][v] = true
		}
		missing += len(vs)
	}
	seen := map[int32]map[int]int{}
	deadline := time.Now().Add(60 * time.Second)
	for missing > 0 && time.Now().Before(deadline) {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(fctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			if seen[r.Partition] == nil {
				seen[r.Partition] = map[int]int{}
			}
			seen[r.Partition][v]++
			got[r.Partition] = append(got[r.Partition], v)
			if want[r.Partition][v] && seen[r.Partition][v] == 1 {
				missing--
			}
		})
	}
	dups := 0
	for p := range acked {
		for _, n := range seen[int32(p)] {
			dups += n - 1
		}
		// Order: the acknowledged values, as they appear in the log, ascend (the
		// producer sent each partition's values in order, one ProduceSync at a time).
		var inLog []int
		for _, v := range got[p] {
			if want[int32(p)][v] {
				inLog = append(inLog, v)
			}
		}
		if !sort.IntsAreSorted(inLog) {
			t.Errorf("partition %d: acknowledged records out of order in the log", p)
		}
		for _, v := range acked[p] {
			if seen[int32(p)][v] == 0 {
				t.Errorf("partition %d: acknowledged record %d is missing (log holds %d records)", p, v, len(got[p]))
				break
			}
		}
	}
	t.Logf("log checked: %d duplicates", dups)
	if dups > 0 {
		t.Errorf("%d duplicate records: the idempotent producer's retries were stored twice", dups)
	}
}

func summarize(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	pct := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(s), pct(0.5), pct(0.99), s[len(s)-1])
}
