package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/group"

	"github.com/sluice-mq/sluice/internal/testlog"
)

// coordinator waits for the node that coordinates groups (the metadata leader, ready).
func (c *memCluster) coordinator() (multiraft.NodeID, *Broker) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range c.ids {
			b := c.nodes[id].b
			if b == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := b.CheckCoordinator(ctx)
			cancel()
			if err == nil {
				return id, b
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no coordinator within 10 s")
	return 0, nil
}

// commitOnCoordinator commits offsets of groupID on whichever node coordinates groups,
// retrying while none does (a failover), and fails the test on any other error.
func (c *memCluster) commitOnCoordinator(groupID string, offsets ...group.OffsetCommit) {
	c.t.Helper()
	for attempt := 0; ; attempt++ {
		if attempt == 200 {
			c.t.Fatalf("commit %s %v: no coordinator took it", groupID, offsets)
		}
		_, b := c.coordinator()
		errs, err := b.CommitOffsets(context.Background(), group.CommitRequest{Group: groupID, Generation: -1, Offsets: offsets})
		if errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrCoordinatorNotAvailable) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err == nil {
			err = errors.Join(errs...)
		}
		if err != nil {
			c.t.Fatalf("commit %s %v: %v", groupID, offsets, err)
		}
		return
	}
}

// newGroupCluster starts three brokers of a cluster in one process with a topic "t" of 2
// partitions, and returns the cluster and its group coordinator (skipped with -short).
func newGroupCluster(t *testing.T) (*memCluster, multiraft.NodeID, *Broker) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := startMemCluster(&memCluster{t: t, logs: &testlog.Buffer{}}, 3)
	c.featureLevelIs(meta.MaxFeatureLevel) // membership records on: every node reads them
	id, ctl := c.coordinator()
	if _, err := ctl.CreateTopic(TopicSettings{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	return c, id, ctl
}

// TestClusterGroupOffsetsSurviveControllerPowerCuts: three brokers of a cluster in one
// process (metadata snapshots every 25 entries, so the group journal's checkpoint runs),
// a group's offsets committed on the coordinator, whose node then loses power; the next
// coordinator serves the last acknowledged offsets, nodes that are not the coordinator
// refuse group calls with NotCoordinatorError, and at the end every node, the ones that
// lost power included, holds the last acknowledged offsets.
func TestClusterGroupOffsetsSurviveControllerPowerCuts(t *testing.T) {
	c, _, _ := newGroupCluster(t)
	acked := map[int32]int64{}
	commit := func(off int64) {
		t.Helper()
		c.commitOnCoordinator("g", group.OffsetCommit{Topic: "t", Partition: 0, Offset: off, LeaderEpoch: -1},
			group.OffsetCommit{Topic: "t", Partition: 1, Offset: off + 1, LeaderEpoch: -1})
		acked[0], acked[1] = off, off+1
	}
	holds := func(b *Broker) bool {
		for p, want := range acked {
			if got, ok := b.FetchOffset("g", "t", p); !ok || got.Offset != want {
				return false
			}
		}
		return true
	}
	rounds := envInt("SLUICE_CLUSTER_CUTS", 4)
	for round := range rounds {
		for i := range 30 { // past a metadata snapshot every round
			commit(int64(100*round + i))
		}
		id, b := c.coordinator()
		if !holds(b) {
			t.Fatalf("round %d: the coordinator does not hold its own acknowledged offsets", round)
		}
		for _, other := range c.ids {
			if ob := c.nodes[other].b; other != id && ob != nil {
				_, err := ob.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", Generation: -1,
					Offsets: []group.OffsetCommit{{Topic: "t", Partition: 0, Offset: 1}}})
				var nc *NotCoordinatorError
				if !errors.As(err, &nc) {
					t.Fatalf("round %d: a commit on n%d (not the coordinator, n%d is): %v", round, other, id, err)
				}
				if _, err := ob.JoinGroup(context.Background(), group.JoinRequest{Group: "g"}); !errors.Is(err, ErrNotCoordinator) {
					t.Fatalf("round %d: a join on n%d: %v", round, other, err)
				}
			}
		}
		c.crash(id, true)
		next, nb := c.coordinator()
		if !holds(nb) {
			got0, _ := nb.FetchOffset("g", "t", 0)
			t.Fatalf("round %d: n%d lost power; the new coordinator n%d has t/0 at %d, acknowledged %d", round, id, next, got0.Offset, acked[0])
		}
		c.start(id)
		t.Logf("round %d: coordinator n%d lost power, n%d took over with the acknowledged offsets", round, id, next)
	}
	// Each takeover is told as one (it rebuilds the coordinator from the journal), never
	// as a reload after a write failure, which no write had.
	logs := c.logs.String()
	if n := strings.Count(logs, `msg="coordinating the consumer groups: rebuilt from the metadata log"`); n < rounds {
		t.Errorf("%d coordinator takeovers logged over %d power cuts of the coordinator", n, rounds)
	}
	if strings.Contains(logs, "after a write failure") {
		t.Errorf("a takeover logged as a reload after a write failure:\n%s", logs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range c.ids {
		for !holds(c.nodes[id].b) {
			if time.Now().After(deadline) {
				got0, _ := c.nodes[id].b.FetchOffset("g", "t", 0)
				t.Fatalf("n%d: t/0 at %d, acknowledged %d", id, got0.Offset, acked[0])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
