package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
)

// TestEveryDataEntryHasALevel: every op of a queue's group and every kind of entry of a
// partition's group has the feature level that admits it, within what this binary reads.
func TestEveryDataEntryHasALevel(t *testing.T) {
	for _, op := range replqueue.Ops() {
		if l, ok := queueOpLevels[op]; !ok || l < meta.LevelBase || l > meta.MaxFeatureLevel {
			t.Errorf("queue op %d: level %d (listed %v)", op, l, ok)
		}
	}
	for _, k := range replpart.EntryKinds() {
		if l, ok := partitionEntryLevels[k]; !ok || l < meta.LevelBase || l > meta.MaxFeatureLevel {
			t.Errorf("%s: level %d (listed %v)", k, l, ok)
		}
	}
	if len(queueOpLevels) != len(replqueue.Ops()) || len(partitionEntryLevels) != len(replpart.EntryKinds()) {
		t.Errorf("a level for a kind the packages do not list: %d queue ops, %d partition kinds", len(queueOpLevels), len(partitionEntryLevels))
	}
}

// TestClusterDataEntriesWaitForTheirLevel: with node 3 holding the cluster at the base
// level, a produce and a queue send whose kinds needed a higher level (as a new kind would)
// are refused with ErrFeatureLevel on the leader before anything is proposed, and go
// through once their kinds are back at the base level. (It changes the package's tables
// for a while: no test here runs in parallel, and nothing in this cluster proposes an entry
// of another kind meanwhile.)
func TestClusterDataEntriesWaitForTheirLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := startMemCluster(&memCluster{t: t, advertise: map[multiraft.NodeID]int{3: meta.LevelBase}}, 3)
	_, ctl := c.coordinator()
	if _, err := ctl.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.CreateQueue(QueueSettings{Name: "jobs"}); err != nil {
		t.Fatal(err)
	}
	p := int32(0)
	produce := func() error {
		var last error
		for _, id := range c.ids {
			_, err := c.nodes[id].b.Produce(context.Background(), "t", []ProduceRecord{{Value: []byte("v"), Partition: &p}}, ProduceOptions{})
			if err == nil || errors.Is(err, meta.ErrFeatureLevel) {
				return err
			}
			last = err
		}
		return last
	}
	send := func() error {
		var last error
		for _, id := range c.ids {
			rs, err := c.nodes[id].b.Send(context.Background(), "jobs", []SendInput{{Body: []byte("m")}})
			if err == nil && rs[0].Err != nil {
				err = rs[0].Err
			}
			if err == nil || errors.Is(err, meta.ErrFeatureLevel) {
				return err
			}
			last = err
		}
		return last
	}
	c.eventually(t, "a produce and a send at the base level", func() error {
		if err := produce(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		if err := send(); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		return nil
	})

	savedQ := map[replqueue.Op]int{replqueue.OpSend: queueOpLevels[replqueue.OpSend], replqueue.OpPut: queueOpLevels[replqueue.OpPut]}
	savedP := partitionEntryLevels[replpart.ProduceEntry]
	restore := func() {
		for op, l := range savedQ {
			queueOpLevels[op] = l
		}
		partitionEntryLevels[replpart.ProduceEntry] = savedP
	}
	defer restore()
	for op := range savedQ {
		queueOpLevels[op] = meta.LevelGroupMembers
	}
	partitionEntryLevels[replpart.ProduceEntry] = meta.LevelGroupMembers
	if err := produce(); !errors.Is(err, meta.ErrFeatureLevel) {
		t.Fatalf("a produce of a kind above the cluster's level: %v, want ErrFeatureLevel", err)
	}
	if err := send(); !errors.Is(err, meta.ErrFeatureLevel) {
		t.Fatalf("a send of a kind above the cluster's level: %v, want ErrFeatureLevel", err)
	}
	restore()
	if err := produce(); err != nil {
		t.Fatalf("a produce once admitted: %v", err)
	}
	if err := send(); err != nil {
		t.Fatalf("a send once admitted: %v", err)
	}
}

// TestAdmitAllocatesNothing: the admit functions run before every proposal of every
// partition and queue; an admitted entry must not allocate (the refusal's text is built
// only for a refusal).
func TestAdmitAllocatesNothing(t *testing.T) {
	c := &clusterRT{meta: meta.NewMachine(1)}
	allocs := testing.AllocsPerRun(100, func() {
		if c.admitQueueOp(replqueue.OpSend) != nil || c.admitPartitionEntry(replpart.CursorKind(replcursor.Ack)) != nil ||
			c.admitPartitionEntry(replpart.ProduceEntry) != nil {
			t.Fatal("refused at the base level")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per admitted entry", allocs)
	}
}
