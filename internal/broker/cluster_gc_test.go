package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestDeletedGroupsCollected: a node down while a topic and a queue are deleted comes
// back with their Raft groups on its disk, which it never opens again; the collector
// removes them, and leaves the groups of the topic that still exists and the metadata
// group. Every memCluster test runs with the collector every 20 ms, so the cluster tests'
// crashes, moves and restarts are its test against removing a live group.
func TestDeletedGroupsCollected(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	for _, name := range []string{"gone", "kept"} {
		if err := c.forwarded(func(b *Broker) error { _, err := b.CreateTopic(TopicSettings{Name: name, Partitions: 2}); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.forwarded(func(b *Broker) error { _, err := b.CreateQueue(QueueSettings{Name: "jobs"}); return err }); err != nil {
		t.Fatal(err)
	}
	c.produceTo("gone", "r", 4)
	st := c.nodes[1].b.cluster.meta.State()
	var gone, kept []multiraft.GroupID
	for _, p := range st.Topics["gone"].Partitions {
		gone = append(gone, p.Group)
	}
	gone = append(gone, st.Queues["jobs"].Group)
	for _, p := range st.Topics["kept"].Partitions {
		kept = append(kept, p.Group)
	}
	onDisk := func(id multiraft.NodeID) []multiraft.GroupID {
		ids, err := c.nodes[id].eng.GroupIDs()
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	// n3 hosts every group once it has caught up (three replicas on three nodes).
	waitDisk := func(what string, ok func([]multiraft.GroupID) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(onDisk(3)); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("n3: %s; its groups on disk: %v (gone %v, kept %v)", what, onDisk(3), gone, kept)
			}
		}
	}
	holds := func(ids []multiraft.GroupID, want []multiraft.GroupID) bool {
		for _, g := range want {
			if !slices.Contains(ids, g) {
				return false
			}
		}
		return true
	}
	waitDisk("never held every group", func(ids []multiraft.GroupID) bool { return holds(ids, append(slices.Clone(gone), kept...)) })

	c.crash(3, false)
	if err := c.forwarded(func(b *Broker) error { return b.DeleteTopic("gone") }); err != nil {
		t.Fatal(err)
	}
	if err := c.forwarded(func(b *Broker) error { return b.DeleteQueue("jobs") }); err != nil {
		t.Fatal(err)
	}
	if ids := onDisk(3); !holds(ids, gone) {
		t.Fatalf("n3 lost groups while it was down: %v", ids)
	}
	c.start(3)
	waitDisk("kept the deleted topic's and queue's groups", func(ids []multiraft.GroupID) bool {
		for _, g := range gone {
			if slices.Contains(ids, g) {
				return false
			}
		}
		return true
	})
	if ids := onDisk(3); !holds(ids, kept) || !slices.Contains(ids, 1) {
		t.Fatalf("n3 removed a live group: %v (kept %v, metadata 1)", ids, kept)
	}
	c.produceTo("kept", "r", 4) // the live topic still works through n3's replicas
}
