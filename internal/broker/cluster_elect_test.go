package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestClusterElectPreferredLeader: a partition led by its second replica is handed back
// to its first by ElectPreferredLeader asked on any node — the leader itself, the other
// replica, a node that hosts no replica (the request travels to the leader) — and a
// second election is not needed; a queue likewise (ElectPreferredQueueLeader). With the preferred replica down and the other two in
// quorum, the election is refused as not available and the leader stays.
func TestClusterElectPreferredLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	was := balanceEvery
	balanceEvery = time.Hour // only the elections under test move a leader back
	t.Cleanup(func() { balanceEvery = was })
	c := newMemCluster(t, 3)
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateTopic(TopicSettings{Name: "two", Partitions: 1, Replication: 2})
		if err != nil {
			return err
		}
		_, err = b.CreateTopic(TopicSettings{Name: "three", Partitions: 1, Replication: 3})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("two", "a", 5)
	c.produceTo("three", "a", 5)
	ctx := context.Background()

	pl, err := c.nodes[c.ids[0]].b.PartitionPlacement("two", 0)
	if err != nil || len(pl.Replicas) != 2 {
		t.Fatalf("two/0 placed %+v %v", pl, err)
	}
	preferred, second := multiraft.NodeID(pl.Replicas[0]), multiraft.NodeID(pl.Replicas[1])
	var outsider multiraft.NodeID
	for _, id := range c.ids {
		if id != preferred && id != second {
			outsider = id
		}
	}
	moveTo := func(topic string, to multiraft.NodeID) {
		t.Helper()
		c.eventually(t, fmt.Sprintf("%s/0 led by n%d", topic, to), func() error {
			l := c.leaderID(topic, 0, 0)
			if l == to {
				return nil
			}
			err := c.nodes[l].b.TransferLeader(topic, 0, int32(to))
			return fmt.Errorf("led by n%d (transfer: %v)", l, err)
		})
	}
	for _, asker := range []multiraft.NodeID{second, outsider, preferred} {
		moveTo("two", second)
		off := c.nodes[second].b.LeadersNotPreferred() // two/0 among them (/metrics)
		if off < 1 {
			t.Fatalf("n%d leads two/0, preferring n%d, and counts %d groups led off their preferred leader", second, preferred, off)
		}
		if err := c.nodes[asker].b.ElectPreferredLeader(ctx, "two", 0); err != nil {
			t.Fatalf("election asked on n%d: %v", asker, err)
		}
		if n := c.nodes[second].b.LeadersNotPreferred(); n != off-1 {
			t.Fatalf("n%d counts %d groups led off their preferred leader after the election, want %d", second, n, off-1)
		}
		for _, id := range c.ids { // the leader has changed when the call returns
			if pl, err := c.nodes[id].b.PartitionPlacement("two", 0); id != outsider && (err != nil || pl.Leader != int32(preferred)) {
				t.Fatalf("after the election asked on n%d, n%d sees leader %d (%v), want n%d", asker, id, pl.Leader, err, preferred)
			}
		}
		if err := c.nodes[asker].b.ElectPreferredLeader(ctx, "two", 0); !errors.Is(err, ErrElectionNotNeeded) {
			t.Fatalf("second election asked on n%d: %v, want not needed", asker, err)
		}
	}
	if err := c.nodes[outsider].b.ElectPreferredLeader(ctx, "two", 1); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("election of two/1: %v", err)
	}

	// A queue (on all three): its leadership moved to its second replica by hand, then
	// elected back from the third.
	if err := c.forwarded(func(b *Broker) error { _, err := b.CreateQueue(QueueSettings{Name: "eq"}); return err }); err != nil {
		t.Fatal(err)
	}
	var cq *meta.Queue
	c.eventually(t, "queue eq on three replicas", func() error {
		if cq = c.nodes[c.ids[0]].b.cluster.meta.State().Queues["eq"]; cq == nil || len(cq.Replicas) != 3 {
			return fmt.Errorf("catalog: %+v", cq)
		}
		return nil
	})
	queueLeader := func() multiraft.NodeID { return c.groupLeader(cq.Group) }
	c.eventually(t, "queue eq led by its second replica", func() error {
		l := queueLeader()
		if l == cq.Replicas[1] {
			return nil
		}
		if l != 0 {
			_ = c.nodes[l].host.TransferLeadership(cq.Group, cq.Replicas[1])
		}
		return fmt.Errorf("led by n%d", l)
	})
	if err := c.nodes[cq.Replicas[2]].b.ElectPreferredQueueLeader(ctx, "eq"); err != nil {
		t.Fatalf("queue election asked on n%d: %v", cq.Replicas[2], err)
	}
	if l := queueLeader(); l != cq.Replicas[0] {
		t.Fatalf("queue eq led by n%d after the election, want n%d", l, cq.Replicas[0])
	}
	if err := c.nodes[cq.Replicas[1]].b.ElectPreferredQueueLeader(ctx, "eq"); !errors.Is(err, ErrElectionNotNeeded) {
		t.Fatalf("second queue election: %v, want not needed", err)
	}
	if err := c.nodes[cq.Replicas[1]].b.ElectPreferredQueueLeader(ctx, "nope"); !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("election of an unknown queue: %v", err)
	}

	pl, err = c.nodes[c.ids[0]].b.PartitionPlacement("three", 0)
	if err != nil || len(pl.Replicas) != 3 {
		t.Fatalf("three/0 placed %+v %v", pl, err)
	}
	first, other := multiraft.NodeID(pl.Replicas[0]), multiraft.NodeID(pl.Replicas[1])
	moveTo("three", other)
	c.stop(first)
	asker := multiraft.NodeID(pl.Replicas[2])
	c.eventually(t, "the election refused while the preferred replica is down", func() error {
		err := c.nodes[asker].b.ElectPreferredLeader(ctx, "three", 0)
		if !errors.Is(err, ErrPreferredLeaderNotAvailable) {
			return fmt.Errorf("election: %v", err)
		}
		return nil
	})
	if l := c.leaderID("three", 0, 0); l != other {
		t.Fatalf("three/0 led by n%d after a refused election, want n%d", l, other)
	}
}

// FuzzElectAnswer: an election answer from a peer decodes without panicking, and what
// decodes encodes to bytes that decode to the same (varints have more than one encoding).
func FuzzElectAnswer(f *testing.F) {
	for _, seed := range [][]byte{electAnswer(electDone, 0), electAnswer(electNotLeader, 3),
		electAnswer(electNotLeader, 1<<40), electAnswer(electTimedOut, 0), {9}, {electNotLeader}, {}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		code, leader, err := decodeElectAnswer(b)
		if err != nil {
			return
		}
		again := electAnswer(code, leader)
		if c2, l2, err := decodeElectAnswer(again); err != nil || c2 != code || l2 != leader {
			t.Fatalf("%x decodes to (%d, %d), whose encoding %x decodes to (%d, %d) %v", b, code, leader, again, c2, l2, err)
		}
	})
}

// FuzzDecodeMarkerRequest: a marker request from a peer decodes without panicking, and
// what decodes encodes to bytes that decode to the same.
func FuzzDecodeMarkerRequest(f *testing.F) {
	for _, m := range []markerRequest{{pid: 1, epoch: 2, commit: true, seq: 3}, {pid: 1 << 40, epoch: 1<<15 - 1, seq: -1}} {
		f.Add(m.encode())
	}
	f.Add([]byte{markerRequestTag})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMarkerRequest(b)
		if err != nil {
			return
		}
		again := m.encode()
		if m2, err := decodeMarkerRequest(again); err != nil || m2 != m {
			t.Fatalf("%x decodes to %+v, whose encoding %x decodes to %+v %v", b, m, again, m2, err)
		}
	})
}

// groupLeader is the node whose host leads Raft group g, 0 if none does now.
func (c *memCluster) groupLeader(g multiraft.GroupID) multiraft.NodeID {
	for _, id := range c.ids {
		if nd := c.nodes[id]; nd.host != nil {
			if st, err := nd.host.Status(g); err == nil && st.Role == raft.StateLeader {
				return id
			}
		}
	}
	return 0
}
