package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/diskguard"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// startClusterToFill starts three in-process nodes, node full on an ErrorFS whose space
// the test runs out (ErrorFS.SetSpace) and gives back.
func startClusterToFill(t *testing.T, full multiraft.NodeID) (*memCluster, *vfs.ErrorFS) {
	var efs *vfs.ErrorFS
	c := startMemCluster(&memCluster{t: t, wrapFS: func(id multiraft.NodeID, m *vfs.MemFS) vfs.FS {
		if id != full {
			return m
		}
		efs = vfs.NewErrorFS(m) // a new one at each start: restarts keep the disk, not the limit
		return efs
	}}, 3)
	return c, efs
}

// TestClusterFullDiskWaitsForRoom: a follower whose disk fills (its Raft log, its
// HardState log and its local partition log all on it) neither stops its Raft host nor
// answers /readyz "ready": it refuses new data at once (the disk guard's full state),
// its Raft groups wait for room while the other two replicas go on acknowledging, and
// once there is room it catches up with every record and is ready again.
func TestClusterFullDiskWaitsForRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const full = multiraft.NodeID(3)
	c, efs := startClusterToFill(t, full)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "f", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "f/0 led by a node with room", func() error {
		l := c.leaderID("f", 0, 0)
		if l != full {
			return nil
		}
		return fmt.Errorf("led by n%d (transfer: %v)", l, c.nodes[l].b.TransferLeader("f", 0, 1))
	})
	c.produceTo("f", "a", 10)
	waitSame(t, c, "f", full)

	b3 := c.nodes[full].b
	efs.SetSpace(0)
	value := strings.Repeat("v", 4<<10)
	p := int32(0)
	acked := 10
	for i := 0; i < 60; i++ { // 240 KiB: past the 64 KiB headroom the first failure frees
		for attempt := 0; ; attempt++ {
			if attempt == 400 {
				t.Fatalf("record %d not acknowledged by the two nodes with room: %s", i, c.describe())
			}
			b := c.leaderOf("f", 0)
			if b == nil || b == b3 {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := b.Produce(ctx, "f", []ProduceRecord{{Value: []byte(fmt.Sprintf("b-%d-%s", i, value)), Partition: &p}}, ProduceOptions{})
			cancel()
			if err == nil {
				acked++
				break
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrReplicationUnknown) {
				t.Fatalf("produce %d with n%d full: %v", i, full, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.eventually(t, fmt.Sprintf("n%d's Raft groups waiting for room", full), func() error {
		if err := c.nodes[full].host.DiskFull(); err == nil {
			return errors.New("not stalled")
		}
		return nil
	})
	if err := c.nodes[full].host.Err(); err != nil {
		t.Fatalf("n%d's Raft host stopped on a full disk: %v", full, err)
	}
	if err := b3.Health(); err == nil {
		t.Fatalf("n%d's /readyz check passes with a full disk", full)
	}
	if _, err := b3.Produce(context.Background(), "f", []ProduceRecord{{Value: []byte("x"), Partition: &p}}, ProduceOptions{}); !errors.Is(err, diskguard.ErrFull) {
		t.Fatalf("produce on n%d with its disk full: %v, want %v", full, err, diskguard.ErrFull)
	}
	if st, _ := b3.RaftStats(); st.DiskFullStalls == 0 || !st.DiskFull {
		t.Fatalf("n%d's stats with its Raft groups stalled: %+v", full, st)
	}

	efs.SetSpace(vfs.Unlimited)
	b3.Maintain() // what the maintenance timer does each second: the guard finds room
	waitSame(t, c, "f", full)
	c.eventually(t, fmt.Sprintf("n%d ready again", full), func() error {
		b3.Maintain() // a failure noted just before the room came back holds the full state until then
		return b3.Health()
	})
	if hw := partitionState(c.mustPart(b3, "f", 0)).HighWatermark; hw != int64(acked) {
		t.Fatalf("n%d holds %d records after catching up, %d were acknowledged", full, hw, acked)
	}
}

// TestReplicaApplyCutsBackAnEntryWithoutRoom: an entry whose batches are appended one by
// one (each idempotent batch under the producer lock) and which finds no room half way is
// undone whole (replpart.Log's contract: the host applies it again once there is room).
// Kept half, its first batch would answer as a duplicate of itself the second time, and
// the partition would hold it at one offset and its records twice.
func TestReplicaApplyCutsBackAnEntryWithoutRoom(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	_, r := openReplicaLog(t, efs)
	pid := ProducerID{ID: 9 << clusterPIDShift}
	idem := func(seq int32, v string) []byte {
		raw, err := batch.Build([]batch.Record{{Timestamp: newClock().Now().UnixMilli(), Value: []byte(v)}},
			batch.Options{Producer: &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: seq}})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	if res, err := r.Apply(2, [][]byte{idem(0, "a")}); err != nil || res[0].Err != nil {
		t.Fatalf("first entry: %+v %v", res, err)
	}
	entry := [][]byte{idem(1, "b"), idem(2, "c"), idem(3, "d")}
	var logWrites atomic.Int32
	efs.Inject(vfs.Fault{Err: syscall.ENOSPC, Match: func(op vfs.Op, path string) bool {
		return op == vfs.OpWrite && strings.HasSuffix(path, ".log") && logWrites.Add(1) > 1 // room for one batch
	}})
	if _, err := r.Apply(2, entry); !vfs.NoSpace(err) {
		t.Fatalf("entry on a disk with room for one batch: %v, want ENOSPC", err)
	}
	if hw := r.p.log.HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d after the entry found no room, want 1 (its first batch cut back)", hw)
	}
	efs.ClearFaults()
	res, err := r.Apply(2, entry)
	if err != nil {
		t.Fatal(err)
	}
	for i, br := range res {
		if br.Err != nil || br.Duplicate || br.Base != int64(1+i) {
			t.Fatalf("batch %d applied again once there was room: %+v, want offset %d, no duplicate", i, br, 1+i)
		}
	}
}

// TestClusterFullNodeHandsOverLeadership: a node whose disk is full refuses new data where
// it leads, so it hands the leadership of its partitions and queues to a replica with room, and the
// leader balancing does not hand them back (it asks the preferred leader's node first)
// until the node has room again; then it does.
func TestClusterFullNodeHandsOverLeadership(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	was := balanceEvery
	balanceEvery = 100 * time.Millisecond // many chances to hand it back too early
	t.Cleanup(func() { balanceEvery = was })
	const full = multiraft.NodeID(3)
	c, efs := startClusterToFill(t, full)
	b3 := c.nodes[full].b
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "shed", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	part := int32(-1) // the partition node 3 is the preferred leader of
	c.eventually(t, "a partition whose preferred leader is node 3", func() error {
		for p := range int32(3) {
			pl, err := b3.PartitionPlacement("shed", p)
			if err != nil {
				return err // not in node 3's catalog yet
			}
			if len(pl.Replicas) > 0 && pl.Replicas[0] == int32(full) {
				part = p
				return nil
			}
		}
		return errors.New("none")
	})
	// And a queue node 3 is the preferred leader of.
	var cq *meta.Queue
	for i := 0; cq == nil || cq.Replicas[0] != full; i++ {
		if i == 6 {
			t.Fatal("node 3 is the preferred leader of none of 6 queues")
		}
		name := fmt.Sprintf("q%d", i)
		if err := c.forwarded(func(b *Broker) error { _, err := b.CreateQueue(QueueSettings{Name: name}); return err }); err != nil {
			t.Fatal(err)
		}
		c.eventually(t, "queue "+name+" on three replicas", func() error {
			if cq = b3.cluster.meta.State().Queues[name]; cq == nil || len(cq.Replicas) != 3 {
				return fmt.Errorf("catalog: %+v", cq)
			}
			return nil
		})
	}
	queueLeader := func() multiraft.NodeID { return c.groupLeader(cq.Group) }
	c.eventually(t, "node 3 leading its preferred partition and queue", func() error {
		if l, q := c.leaderID("shed", part, 0), queueLeader(); l != full || q != full {
			return fmt.Errorf("led by n%d and n%d", l, q)
		}
		return nil
	})

	efs.SetSpace(0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := b3.Produce(ctx, "shed", []ProduceRecord{{Value: []byte("fills it"), Partition: &part}}, ProduceOptions{})
	cancel()
	t.Logf("the produce that found node 3's disk full: %v", err)
	c.eventually(t, "node 3 in its full state", func() error { return notYet(b3.Health() != nil) })
	c.eventually(t, "the partition and the queue led by nodes with room", func() error {
		if l, q := c.leaderID("shed", part, 0), queueLeader(); l == full || q == full {
			return fmt.Errorf("led by n%d and n%d", l, q)
		}
		return nil
	})
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if l, q := c.leaderID("shed", part, 0), queueLeader(); l == full || q == full {
			t.Fatalf("back to node 3 while its disk is full: partition led by n%d, queue by n%d", l, q)
		}
	}
	c.produceToPart("shed", part, 5) // through the new leader, acknowledged by the two with room

	efs.SetSpace(vfs.Unlimited)
	c.eventually(t, "node 3 leading its preferred partition and queue again once it has room", func() error {
		b3.Maintain()
		if l, q := c.leaderID("shed", part, 0), queueLeader(); l != full || q != full {
			return fmt.Errorf("led by n%d and n%d (node 3 health: %v)", l, q, b3.Health())
		}
		return nil
	})
}

// TestClusterFullControllerHandsOver: the controller's node fills. The metadata group's
// entries (catalog changes, offset commits) are the cluster's own records, which the disk
// guard does not refuse, so the full node would go on appending them into the headroom it
// released and then stall the metadata group of the whole cluster. It hands the group to
// a node with room instead, and the catalog stays writable through any node.
func TestClusterFullControllerHandsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const full = multiraft.NodeID(3)
	c, efs := startClusterToFill(t, full)
	b3 := c.nodes[full].b
	controller := func() multiraft.NodeID { return c.groupLeader(meta.Group) }
	c.eventually(t, "node 3 the controller", func() error {
		if l := controller(); l != full {
			if l != 0 {
				_ = c.nodes[l].b.cluster.host.TransferLeadership(meta.Group, full)
			}
			return fmt.Errorf("controller n%d", l)
		}
		return nil
	})
	if _, err := b3.CreateTopic(TopicSettings{Name: "fill", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "fill/0 led by node 3", func() error {
		if l := c.leaderID("fill", 0, 0); l != full {
			if h := c.mustPart(c.nodes[1].b, "fill", 0).repl.Load(); h != nil && l != 0 {
				_ = c.nodes[l].b.cluster.host.TransferLeadership(h.group, full)
			}
			return fmt.Errorf("led by n%d", l)
		}
		return nil
	})
	efs.SetSpace(0)
	part := int32(0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := b3.Produce(ctx, "fill", []ProduceRecord{{Value: []byte("fills it"), Partition: &part}}, ProduceOptions{})
	cancel()
	t.Logf("the produce that found node 3's disk full: %v", err)
	c.eventually(t, "node 3 in its full state", func() error { return notYet(b3.Health() != nil) })
	c.eventually(t, "the controller on a node with room", func() error {
		if l := controller(); l == 0 || l == full {
			return fmt.Errorf("controller n%d", l)
		}
		return nil
	})
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if l := controller(); l == full {
			t.Fatal("the controller is back on node 3 while its disk is full")
		}
	}
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "after", Partitions: 1}); err != nil {
		t.Fatalf("a topic created while node 3 is full: %v", err)
	}
}
