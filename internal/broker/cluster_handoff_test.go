package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// ledBy lists the groups node id leads.
func (c *memCluster) ledBy(id multiraft.NodeID) []multiraft.GroupID {
	h := c.nodes[id].b.cluster.host
	var out []multiraft.GroupID
	for _, g := range h.Groups() {
		if st, err := h.Status(g); err == nil && st.Role == raft.StateLeader {
			out = append(out, g)
		}
	}
	return out
}

// TestClusterHandOffLeadership: a node about to stop hands every group it leads — its
// partitions, its queues and the metadata group — to the two other nodes, spread over
// both, and their leader balancing (every 100 ms here, so with many chances) hands none
// back while it is stopping; the partitions take writes through their new leaders.
func TestClusterHandOffLeadership(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	was, wasAsk := balanceEvery, askRefusesTimeout
	balanceEvery = 100 * time.Millisecond
	askRefusesTimeout = 10 * time.Second // the answers checked here, even on a loaded machine
	t.Cleanup(func() { balanceEvery, askRefusesTimeout = was, wasAsk })
	c := startMemCluster(&memCluster{t: t}, 3)
	const stopping = multiraft.NodeID(1)
	b1 := c.nodes[stopping].b
	if _, err := b1.CreateTopic(TopicSettings{Name: "h", Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		name := fmt.Sprintf("hq%d", i)
		if err := c.forwarded(func(b *Broker) error { _, err := b.CreateQueue(QueueSettings{Name: name}); return err }); err != nil {
			t.Fatal(err)
		}
	}
	c.produceTo("h", "before", 30)
	// Node 1 leads the controller and at least three partitions (the balancing gives it
	// the ones it prefers; the rest are moved to it by hand).
	c.eventually(t, "node 1 the controller and the leader of three partitions", func() error {
		if l := c.groupLeader(meta.Group); l != stopping {
			if l != 0 {
				_ = c.nodes[l].b.cluster.host.TransferLeadership(meta.Group, stopping)
			}
			return fmt.Errorf("controller n%d", l)
		}
		led := 0
		for p := range int32(6) {
			l := c.leaderID("h", p, 0)
			if l == stopping {
				led++
			} else if l != 0 && led < 3 {
				_ = c.nodes[l].b.TransferLeader("h", p, int32(stopping))
			}
		}
		return notYet(led >= 3)
	})
	before := c.ledBy(stopping)
	t.Logf("node 1 leads %d groups", len(before))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b1.HandOffLeadership(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hand-off: %+v", out)
	if out.Kept != 0 || out.Led < len(before) || out.Led < 4 {
		t.Fatalf("hand-off %+v; node 1 led %d groups before", out, len(before))
	}
	if led := c.ledBy(stopping); len(led) != 0 {
		t.Fatalf("node 1 still leads %v after the hand-off", led)
	}
	took := map[multiraft.NodeID]int{}
	for _, g := range before {
		took[c.groupLeader(g)]++
	}
	if took[2] == 0 || took[3] == 0 {
		t.Fatalf("the groups node 1 led went to %v: not spread over nodes 2 and 3", took)
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if led := c.ledBy(stopping); len(led) != 0 {
			t.Fatalf("groups %v handed back to node 1 while it stops", led)
		}
	}
	c.produceTo("h", "after", 30)
	if _, err := c.nodes[2].b.CreateTopic(TopicSettings{Name: "after-handoff", Partitions: 1}); err != nil {
		t.Fatalf("the catalog through the new controller: %v", err)
	}
}

// TestClusterHandOffGivesUpWithNobodyToTakeIt: when both other nodes refuse leadership
// (they are stopping too) nothing can take node 1's groups: the hand-off keeps them,
// says so, and returns after handOffPatience rather than at its context's end.
func TestClusterHandOffGivesUpWithNobodyToTakeIt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	wasAsk := askRefusesTimeout
	askRefusesTimeout = 10 * time.Second // the answers checked here, even on a loaded machine
	t.Cleanup(func() { askRefusesTimeout = wasAsk })
	c := startMemCluster(&memCluster{t: t}, 3)
	b1 := c.nodes[1].b
	if _, err := b1.CreateTopic(TopicSettings{Name: "kept", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "node 1 leading kept/0", func() error {
		if l := c.leaderID("kept", 0, 0); l != 1 {
			if l != 0 {
				_ = c.nodes[l].b.TransferLeader("kept", 0, 1)
			}
			return fmt.Errorf("led by n%d", l)
		}
		return nil
	})
	c.nodes[2].b.cluster.stopping.Store(true)
	c.nodes[3].b.cluster.stopping.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	out, err := b1.HandOffLeadership(ctx)
	took := time.Since(began)
	t.Logf("hand-off: %+v in %v", out, took)
	if err != nil {
		t.Fatal(err)
	}
	if out.Led == 0 || out.Kept != out.Led {
		t.Fatalf("hand-off %+v: with both other nodes refusing, node 1 should keep what it led", out)
	}
	if took < handOffPatience || took > handOffPatience+5*time.Second {
		t.Fatalf("the hand-off took %v with nobody to take its groups: it should give up after %v", took, handOffPatience)
	}
	if l := c.leaderID("kept", 0, 0); l != 1 {
		t.Fatalf("kept/0 led by n%d", l)
	}
}

// TestHandOffTargetSpreadsAndSkipsRefusers: the target is an in-sync voter other than
// the node itself, never one that refuses leadership, and the one handed the fewest.
func TestHandOffTargetSpreadsAndSkipsRefusers(t *testing.T) {
	none := func(multiraft.NodeID) bool { return false }
	tests := []struct {
		name    string
		inSync  []multiraft.NodeID
		refuses func(multiraft.NodeID) bool
		handed  map[multiraft.NodeID]int
		want    multiraft.NodeID
	}{
		{"only itself", []multiraft.NodeID{1}, none, nil, 0},
		{"the first other", []multiraft.NodeID{1, 2, 3}, none, nil, 2},
		{"the one handed fewer", []multiraft.NodeID{1, 2, 3}, none, map[multiraft.NodeID]int{2: 3, 3: 1}, 3},
		{"a tie goes to the first", []multiraft.NodeID{3, 1, 2}, none, map[multiraft.NodeID]int{2: 1, 3: 1}, 3},
		{"not one that refuses", []multiraft.NodeID{1, 2, 3}, func(n multiraft.NodeID) bool { return n == 2 }, nil, 3},
		{"all others refuse", []multiraft.NodeID{1, 2, 3}, func(n multiraft.NodeID) bool { return n != 1 }, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := multiraft.GroupStatus{InSync: tc.inSync}
			handed := tc.handed
			if handed == nil {
				handed = map[multiraft.NodeID]int{}
			}
			if got := handOffTarget(st, 1, tc.refuses, handed); got != tc.want {
				t.Fatalf("got node %d, want %d", got, tc.want)
			}
		})
	}
}

// TestHandOffOutsideACluster: a single node has nothing to hand over.
func TestHandOffOutsideACluster(t *testing.T) {
	b := newEnv(t, nil).b
	if _, err := b.HandOffLeadership(context.Background()); !errors.Is(err, ErrNotClustered) {
		t.Fatalf("got %v, want ErrNotClustered", err)
	}
}

// TestClusterHandOffReturnsAtOnceWithNoPeerUp: the last node of a cluster to stop has
// nobody to hand its groups to and nothing to wait for: the hand-off returns at once
// rather than after handOffPatience.
func TestClusterHandOffReturnsAtOnceWithNoPeerUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := startMemCluster(&memCluster{t: t}, 3)
	b1 := c.nodes[1].b
	if _, err := b1.CreateTopic(TopicSettings{Name: "last", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "node 1 leading last/0", func() error {
		if l := c.leaderID("last", 0, 0); l != 1 {
			if l != 0 {
				_ = c.nodes[l].b.TransferLeader("last", 0, 1)
			}
			return fmt.Errorf("led by n%d", l)
		}
		return nil
	})
	c.stop(2)
	c.stop(3)
	h := b1.cluster.host
	c.eventually(t, "nodes 2 and 3 counted down", func() error { return notYet(!h.PeerAlive(2) && !h.PeerAlive(3)) })
	began := time.Now()
	out, err := b1.HandOffLeadership(context.Background())
	took := time.Since(began)
	t.Logf("hand-off: %+v in %v", out, took)
	if err != nil {
		t.Fatal(err)
	}
	if out.Led == 0 {
		t.Skip("node 1 stepped down before the hand-off (CheckQuorum): nothing to check")
	}
	if out.Kept != out.Led || took >= handOffPatience {
		t.Fatalf("hand-off %+v in %v with no peer up: want every group kept, at once", out, took)
	}
}
