package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestClusterReassignPartition: a partition of two replicas on a three-node cluster is
// moved to another pair (its preferred leader among the new ones) and then to three
// replicas, while it holds records: each move ends (ListPartitionReassignments empty), the
// catalog and every node agree on the replicas, a node taken out stops hosting the group,
// and every replica's log holds every record produced, before and after. A list of another
// length without leave to change the replication factor, an unknown node, a node twice and
// an unknown partition are refused and change nothing.
func TestClusterReassignPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateTopic(TopicSettings{Name: "r", Partitions: 1, Replication: 2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("r", "a", 20)
	replicasOf := func() []int32 {
		pl, err := c.nodes[c.ids[0]].b.PartitionPlacement("r", 0)
		if err != nil {
			t.Fatal(err)
		}
		return pl.Replicas
	}
	first := replicasOf()
	if len(first) != 2 {
		t.Fatalf("replicas %v, want 2", first)
	}
	var spare int32
	for _, id := range c.ids {
		if !slices.Contains(first, int32(id)) {
			spare = int32(id)
		}
	}
	b := c.nodes[c.ids[0]].b
	var inv *InvalidArgumentError
	for _, tc := range []struct {
		reps    []int32
		allowRF bool
		ok      func(error) bool
	}{
		{[]int32{spare, first[0], first[1]}, false, func(err error) bool { return errors.As(err, &inv) }},
		{[]int32{spare, 9}, true, func(err error) bool { return errors.Is(err, ErrInvalidReplicaAssignment) }},
		{[]int32{spare, spare}, true, func(err error) bool { return errors.Is(err, ErrInvalidReplicaAssignment) }},
	} {
		if err := c.forwarded(func(b *Broker) error { return b.ReassignPartition("r", 0, tc.reps, tc.allowRF) }); !tc.ok(err) {
			t.Fatalf("reassign to %v (allow rf %v): %v", tc.reps, tc.allowRF, err)
		}
	}
	if err := b.ReassignPartition("r", 1, []int32{1}, true); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("reassign of an unknown partition: %v", err)
	}
	if got := replicasOf(); !slices.Equal(got, first) {
		t.Fatalf("refused reassignments changed the replicas: %v", got)
	}

	for _, target := range [][]int32{{spare, first[0]}, {first[1], spare, first[0]}} {
		if err := c.forwarded(func(b *Broker) error { return b.ReassignPartition("r", 0, target, len(target) == 3) }); err != nil {
			t.Fatalf("reassign to %v: %v", target, err)
		}
		c.awaitNoReassignment(t)
		for _, id := range c.ids {
			c.eventually(t, fmt.Sprintf("n%d places r/0 on %v", id, target), func() error {
				pl, err := c.nodes[id].b.PartitionPlacement("r", 0)
				if err != nil || !slices.Equal(pl.Replicas, target) {
					return fmt.Errorf("placement %+v %v", pl, err)
				}
				hosts := c.mustPart(c.nodes[id].b, "r", 0).repl.Load() != nil
				if hosts != slices.Contains(target, int32(id)) {
					return fmt.Errorf("hosts the group: %v", hosts)
				}
				return nil
			})
		}
		c.produceTo("r", fmt.Sprint("after", len(target)), 5)
		for _, id := range target {
			c.eventually(t, fmt.Sprintf("n%d holds every record of r/0", id), func() error {
				recs, err := localRecords(c.nodes[multiraft.NodeID(id)].b, "r", 0)
				if err != nil || len(recs) != 20+5*(len(target)-1) {
					return fmt.Errorf("%d records (%v)", len(recs), err)
				}
				return nil
			})
		}
	}
}

// awaitNoReassignment waits until no live node lists a partition moving.
func (c *memCluster) awaitNoReassignment(t *testing.T) {
	t.Helper()
	for _, id := range c.ids {
		if c.nodes[id].b == nil {
			continue
		}
		c.eventually(t, fmt.Sprintf("n%d lists no reassignment", id), func() error {
			rs, err := c.nodes[id].b.PartitionReassignments()
			if err != nil || len(rs) > 0 {
				return fmt.Errorf("%+v %v", rs, err)
			}
			return nil
		})
	}
}

// eventually retries f every 20 ms for up to 30 s.
func (c *memCluster) eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterReassignReplacesStuckMove: a move to a node that is down cannot finish (its
// learner never catches up) and stays listed; a second reassignment replaces its target,
// as Kafka replaces a reassignment under way, and the partition reaches the new one with
// every record. Stuck again, the reassignment is cancelled and the partition goes back to
// the replicas it had; the down node hosts nothing of it once back.
func TestClusterReassignReplacesStuckMove(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateTopic(TopicSettings{Name: "s", Partitions: 1, Replication: 2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("s", "a", 10)
	pl, err := c.nodes[c.ids[0]].b.PartitionPlacement("s", 0)
	if err != nil || len(pl.Replicas) != 2 {
		t.Fatalf("s/0 placed %+v %v", pl, err)
	}
	a, b := multiraft.NodeID(pl.Replicas[0]), multiraft.NodeID(pl.Replicas[1])
	var down multiraft.NodeID
	for _, id := range c.ids {
		if id != a && id != b {
			down = id
		}
	}
	c.stop(down)
	if err := c.via(a, func(br *Broker) error { return br.ReassignPartition("s", 0, []int32{int32(a), int32(down)}, false) }); err != nil {
		t.Fatalf("reassign to a node that is down: %v", err)
	}
	rs, err := c.nodes[a].b.PartitionReassignments()
	if err != nil || len(rs) != 1 || !slices.Equal(rs[0].Adding, []int32{int32(down)}) {
		t.Fatalf("listed moving: %+v %v, want s/0 adding n%d", rs, err, down)
	}
	// Kafka's listing is the controller's, after a barrier: whichever node answers it has
	// the move acknowledged above, and the others send the client to the controller.
	c.eventually(t, "the controller lists s/0 moving", func() error {
		listed := 0
		for _, id := range []multiraft.NodeID{a, b} {
			rs, err := c.nodes[id].b.ConfirmedPartitionReassignments(context.Background())
			var nl *NotLeaderError
			switch {
			case errors.As(err, &nl) && nl.Catalog:
			case err != nil || len(rs) != 1 || !slices.Equal(rs[0].Adding, []int32{int32(down)}):
				t.Fatalf("n%d's confirmed listing: %+v %v, want s/0 adding n%d", id, rs, err, down)
			default:
				listed++
			}
		}
		if listed != 1 {
			return fmt.Errorf("%d nodes answered as the controller", listed)
		}
		return nil
	})
	target := []int32{int32(b), int32(a)}
	if err := c.via(b, func(br *Broker) error { return br.ReassignPartition("s", 0, target, false) }); err != nil {
		t.Fatalf("replacing the stuck move: %v", err)
	}
	c.awaitNoReassignment(t)
	c.produceTo("s", "b", 5)
	for _, id := range []multiraft.NodeID{a, b} {
		c.eventually(t, fmt.Sprintf("n%d places s/0 on %v with every record", id, target), func() error {
			pl, err := c.nodes[id].b.PartitionPlacement("s", 0)
			if err != nil || !slices.Equal(pl.Replicas, target) {
				return fmt.Errorf("placement %+v %v", pl, err)
			}
			recs, err := localRecords(c.nodes[id].b, "s", 0)
			if err != nil || len(recs) != 15 {
				return fmt.Errorf("%d records (%v)", len(recs), err)
			}
			return nil
		})
	}
	// Stuck again, and cancelled: back to the replicas it had.
	if err := c.via(a, func(br *Broker) error { return br.ReassignPartition("s", 0, []int32{int32(b), int32(down)}, false) }); err != nil {
		t.Fatalf("reassign to a node that is down again: %v", err)
	}
	c.eventually(t, fmt.Sprintf("n%d lists s/0 adding n%d, removing n%d", b, down, a), func() error {
		if rs, err := c.nodes[b].b.PartitionReassignments(); err != nil || len(rs) != 1 ||
			!slices.Equal(rs[0].Adding, []int32{int32(down)}) || !slices.Equal(rs[0].Removing, []int32{int32(a)}) {
			return fmt.Errorf("listed %+v %v", rs, err)
		}
		return nil
	})
	if err := c.via(b, func(br *Broker) error { return br.CancelPartitionReassignment("s", 0) }); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	c.awaitNoReassignment(t)
	for _, id := range []multiraft.NodeID{a, b} {
		c.eventually(t, fmt.Sprintf("n%d places s/0 back on %v", id, target), func() error {
			if pl, err := c.nodes[id].b.PartitionPlacement("s", 0); err != nil || !slices.Equal(pl.Replicas, target) {
				return fmt.Errorf("placement %+v %v", pl, err)
			}
			return nil
		})
	}
	if err := c.nodes[a].b.CancelPartitionReassignment("s", 0); !errors.Is(err, ErrNoReassignmentInProgress) {
		t.Fatalf("cancel with nothing moving: %v", err)
	}
	c.start(down)
	c.eventually(t, fmt.Sprintf("n%d, back, hosts nothing of s/0", down), func() error {
		pl, err := c.nodes[down].b.PartitionPlacement("s", 0)
		if err != nil || !slices.Equal(pl.Replicas, target) {
			return fmt.Errorf("placement %+v %v", pl, err)
		}
		if c.mustPart(c.nodes[down].b, "s", 0).repl.Load() != nil {
			return fmt.Errorf("hosts the group")
		}
		return nil
	})
}
