package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/internal/broker"
)

// TestElectLeadersThroughKafka: on a cluster started with --cluster-leader-balance 0 (no
// automatic hand-back, as Kafka's auto.leader.rebalance.enable=false), each partition's
// leadership is moved off its preferred replica with `sluice cluster transfer-leader` and
// stays there; kadm's ElectLeaders (preferred, every partition) hands each back, answering
// once it is done, and asked again finds nothing to do; `sluice cluster elect` does the
// same for a partition and a queue. An unclean election is never needed while a partition
// has a leader.
func TestElectLeadersThroughKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	c := startCluster(t, 3, "--cluster-leader-balance", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	const parts = 3
	createTopic(ctx, t, adm, "elect", parts, 3)
	preferred, second := map[int32]int32{}, map[int32]int32{}
	for p := range int32(parts) {
		for c.leaderOf(ctx, adm, "elect", p) == 0 && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		md, err := adm.Metadata(ctx, "elect")
		if err != nil {
			t.Fatal(err)
		}
		reps := md.Topics["elect"].Partitions[p].Replicas
		preferred[p], second[p] = reps[0], reps[1]
		to := reps[1]
		for c.leaderOf(ctx, adm, "elect", p) != int(to) {
			if ctx.Err() != nil {
				t.Fatalf("elect/%d never moved to node %d", p, to)
			}
			// Asked of any node: the command finds the leader.
			c.cli(t, 1, "cluster", "transfer-leader", "elect", strconv.Itoa(int(p)), "--to", strconv.Itoa(int(to)))
			time.Sleep(200 * time.Millisecond)
		}
	}
	for p, want := range preferred {
		if l := c.leaderOf(ctx, adm, "elect", p); int32(l) == want {
			t.Fatalf("elect/%d went back to node %d by itself with --cluster-leader-balance 0", p, l)
		}
	}

	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range preferred {
		r, ok := res["elect"][p]
		if !ok || r.Err != nil {
			t.Fatalf("ElectLeaders on elect/%d: %+v (listed: %v)", p, r, ok)
		}
		// Answered once the old leader saw the preferred one take over; every node
		// learns it within a heartbeat or so (nothing else moves leaders here).
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			l := c.leaderOf(ctx, adm, "elect", p)
			if int32(l) == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("elect/%d led by node %d 5 s after ElectLeaders, want %d", p, l, want)
			}
		}
	}
	// The CLI does the same for one partition, and for a queue (no Kafka API names one).
	c.cli(t, 2, "cluster", "transfer-leader", "elect", "0", "--to", strconv.Itoa(int(second[0])))
	for c.leaderOf(ctx, adm, "elect", 0) != int(second[0]) {
		if ctx.Err() != nil {
			t.Fatal("elect/0 never moved off its preferred replica again")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var st broker.ClusterStatus // status names the preferred leader beside the leader
	if err := json.Unmarshal([]byte(c.cli(t, 1, "cluster", "status", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(st.Partitions, func(r broker.ReplicaState) bool { return r.Topic == "elect" && r.Partition == 0 }); i < 0 ||
		st.Partitions[i].Preferred != preferred[0] || st.Partitions[i].Pinned {
		t.Fatalf("cluster status lists elect/0 as %+v, want preferred %d, not pinned", st.Partitions, preferred[0])
	}
	if out := c.cli(t, 3, "cluster", "elect", "elect", "0"); !strings.Contains(out, "elect/0 is led by its preferred replica") {
		t.Fatalf("sluice cluster elect: %s", out)
	}
	createQueue(ctx, t, c.sqsClient(ctx, t, 1), "electq", 30)
	for { // a replica just created may not be in sync yet: "not in sync", tried again
		out, err := c.cliErr(2, "cluster", "elect", "--queue", "electq")
		if err == nil && strings.Contains(out, "queue electq") {
			break
		}
		if ctx.Err() != nil || !strings.Contains(out, "not in sync") {
			t.Fatalf("sluice cluster elect --queue: %v %s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}

	for _, how := range []kadm.ElectLeadersHow{kadm.ElectPreferredReplica, kadm.ElectLiveReplica} {
		res, err = adm.ElectLeaders(ctx, how, kadm.TopicsSet{"elect": {0: {}, 1: {}, 2: {}}})
		if err != nil {
			t.Fatal(err)
		}
		for p := range int32(parts) {
			if r := res["elect"][p]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Fatalf("election %d of elect/%d again: %v %s, want ELECTION_NOT_NEEDED", how, p, r.Err, r.ErrMessage)
			}
		}
	}
}
