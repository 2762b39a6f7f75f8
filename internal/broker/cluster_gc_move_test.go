package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestMovedAwayReplicaCollected: a node down while one of its replicas is moved to
// another node comes back with that group on its disk; the collector removes it once the
// node's catalog places the group elsewhere, and keeps the node's other groups.
func TestMovedAwayReplicaCollected(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a four-node cluster")
	}
	c := newMemCluster(t, 4)
	if err := c.forwarded(func(b *Broker) error { _, err := b.CreateTopic(TopicSettings{Name: "t", Partitions: 4}); return err }); err != nil {
		t.Fatal(err)
	}
	c.produceTo("t", "r", 8)
	// A partition with a replica on n4 and one node that lacks it.
	st := c.nodes[1].b.cluster.meta.State()
	var g multiraft.GroupID
	var to multiraft.NodeID
	var kept []multiraft.GroupID
	for _, p := range st.Topics["t"].Partitions {
		if g == 0 && slices.Contains(p.Replicas, 4) {
			g = p.Group
			for _, n := range []multiraft.NodeID{1, 2, 3} {
				if !slices.Contains(p.Replicas, n) {
					to = n
				}
			}
			continue
		}
		if slices.Contains(p.Replicas, 4) {
			kept = append(kept, p.Group)
		}
	}
	if g == 0 || to == 0 {
		t.Fatalf("no partition to move off n4: %+v", st.Topics["t"].Partitions)
	}
	onDisk := func() []multiraft.GroupID {
		ids, err := c.nodes[4].eng.GroupIDs()
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	waitDisk := func(what string, ok func([]multiraft.GroupID) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(onDisk()); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("n4: %s; its groups on disk: %v (moved %d, kept %v)", what, onDisk(), g, kept)
			}
		}
	}
	waitDisk("never held the group", func(ids []multiraft.GroupID) bool { return slices.Contains(ids, g) })

	c.crash(4, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.forwarded(func(b *Broker) error { return b.cluster.cat.MoveReplica(ctx, g, 4, to) }); err != nil {
		t.Fatal(err)
	}
	for {
		p := c.nodes[to].b.cluster.meta.State().Groups()
		i := slices.IndexFunc(p, func(gp meta.GroupPlacement) bool { return gp.Group == g })
		if i >= 0 && p[i].Old == nil && !slices.Contains(p[i].Replicas, 4) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the move off n4 did not finish: %+v", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Contains(onDisk(), g) {
		t.Fatal("n4 lost the group while it was down")
	}
	c.start(4)
	waitDisk("kept the replica moved away", func(ids []multiraft.GroupID) bool { return !slices.Contains(ids, g) })
	if ids := onDisk(); !slices.Contains(ids, 1) {
		t.Fatalf("n4 removed the metadata group: %v", ids)
	}
	waitDisk("lost a group still placed on it", func(ids []multiraft.GroupID) bool {
		for _, k := range kept {
			if !slices.Contains(ids, k) {
				return false
			}
		}
		return true
	})
	c.produceTo("t", "r", 8) // every partition still works
}
