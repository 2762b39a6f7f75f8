package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestClusterNodeWithoutAReplicaNamesTheLeader: on four nodes with replication factor 3,
// a node that hosts no replica of a partition or a queue names its actual leader — in
// Kafka Metadata (with the leader's term as epoch and its in-sync replicas), in the
// NOT_LEADER refusal of a produce, and in the refusal a queue request is forwarded by —
// after that leader moved off the preferred replica. Before, it named the preferred
// replica with every replica in sync, whatever Raft had elected.
func TestClusterNodeWithoutAReplicaNamesTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a four-node cluster")
	}
	was := balanceEvery
	balanceEvery = time.Hour // the leaders stay where the test moves them
	t.Cleanup(func() { balanceEvery = was })
	c := startMemCluster(&memCluster{t: t}, 4)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "wide", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	// A partition some node hosts no replica of, and that node.
	var part int32
	var outside multiraft.NodeID
	var replicas []multiraft.NodeID
	c.eventually(t, "the placement of wide in the catalog", func() error {
		ct := c.nodes[1].b.cluster.meta.State().Topics["wide"]
		if ct == nil || len(ct.Partitions) != 4 || len(ct.Partitions[0].Replicas) != 3 {
			return fmt.Errorf("catalog: %+v", ct)
		}
		replicas = ct.Partitions[0].Replicas
		for _, id := range c.ids {
			if !slices.Contains(replicas, id) {
				outside = id
			}
		}
		return nil
	})
	t.Logf("wide/%d on %v; node %d hosts no replica", part, replicas, outside)
	// Its leader moved to a replica that is not the preferred one.
	moved := replicas[1]
	c.eventually(t, "wide/0 led by its second replica", func() error {
		l := c.leaderID("wide", part, 0)
		if l != moved && l != 0 {
			_ = c.nodes[l].b.TransferLeader("wide", part, int32(moved))
		}
		return notYet(l == moved)
	})
	c.produceToPart("wide", part, 3)
	bo := c.nodes[outside].b
	c.eventually(t, "node outside naming the leader in Metadata", func() error {
		pl, err := bo.PartitionPlacement("wide", part)
		if err != nil {
			return err
		}
		if pl.Leader != int32(moved) || pl.Epoch == 0 || len(pl.InSync) == 0 || !slices.Contains(pl.InSync, int32(moved)) {
			return fmt.Errorf("placement %+v", pl)
		}
		return nil
	})
	c.eventually(t, "node outside describing wide/0 with its leader's offsets", func() error {
		info, err := bo.DescribeTopic("wide")
		if err != nil {
			return err
		}
		if pi := info.Partitions[part]; pi.HighWatermark != 3 {
			return fmt.Errorf("wide/%d: %+v", part, pi)
		}
		return nil
	})
	// A group's lag there counts from the leader's high watermark (in messages; its age
	// is unknown where no copy of the records is).
	_, pp, err := bo.streams.partition("wide", part)
	if err != nil {
		t.Fatal(err)
	}
	if l := partitionLag(pp, bo.offsetsOf(pp), 1, time.Now()); l.Messages != 2 || l.HighWatermark != 3 {
		t.Fatalf("lag of a group at offset 1 on node outside: %+v, want 2 messages behind 3", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p := part
	_, err = bo.Produce(ctx, "wide", []ProduceRecord{{Value: []byte("x"), Partition: &p}}, ProduceOptions{})
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != int32(moved) {
		t.Fatalf("produce through node %d: %v; want NOT_LEADER naming node %d", outside, err, moved)
	}

	// A queue whose replicas leave out node outside.
	var cq *meta.Queue
	for i := 0; cq == nil || slices.Contains(cq.Replicas, outside); i++ {
		if i == 8 {
			t.Fatalf("node %d hosts a replica of each of 8 queues", outside)
		}
		name := fmt.Sprintf("wq%d", i)
		if err := c.forwarded(func(b *Broker) error { _, err := b.CreateQueue(QueueSettings{Name: name}); return err }); err != nil {
			t.Fatal(err)
		}
		c.eventually(t, "queue "+name+" in node outside's catalog", func() error {
			if cq = bo.cluster.meta.State().Queues[name]; cq == nil || len(cq.Replicas) != 3 {
				return fmt.Errorf("catalog: %+v", cq)
			}
			return nil
		})
	}
	qmoved := cq.Replicas[2]
	c.eventually(t, "the queue led by its third replica", func() error {
		l := c.groupLeader(cq.Group)
		if l != qmoved && l != 0 {
			_ = c.nodes[l].b.cluster.host.TransferLeadership(cq.Group, qmoved)
		}
		return notYet(l == qmoved)
	})
	c.eventually(t, "node outside naming the queue's leader", func() error {
		_, _, err := bo.cluster.leaderQueue(cq.Name)
		if !errors.As(err, &nl) {
			return fmt.Errorf("leaderQueue: %v", err)
		}
		if nl.Leader != int32(qmoved) {
			return fmt.Errorf("names node %d, want %d", nl.Leader, qmoved)
		}
		return nil
	})
}

// TestDecodeLeadersRefusesMalformed: the answer round-trips, and every cut or padded
// copy of it is refused rather than read as fewer or other groups.
func TestDecodeLeadersRefusesMalformed(t *testing.T) {
	enc := encodeLeadersOf([]leaderClaim{{group: 7, term: 3, inSync: []multiraft.NodeID{2, 4}, hw: 1000, start: 10}, {group: 300, term: 1 << 40}})
	got, err := decodeLeaders(enc, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[7].Leader != 2 || got[7].Term != 3 || !slices.Equal(got[7].InSync, []multiraft.NodeID{2, 4}) ||
		got[7].HighWatermark != 1000 || got[7].LogStart != 10 || got[300].Term != 1<<40 || len(got[300].InSync) != 0 {
		t.Fatalf("decoded %+v", got)
	}
	if _, err := decodeLeaders(encodeLeadersOf([]leaderClaim{{group: 1, term: 1, hw: 5, start: 6}}), 2); err == nil {
		t.Error("a log start past the high watermark decoded")
	}
	for i := range len(enc) {
		if _, err := decodeLeaders(enc[:i], 2); err == nil {
			t.Errorf("the first %d of %d bytes decoded", i, len(enc))
		}
	}
	if _, err := decodeLeaders(append(slices.Clone(enc), 0), 2); err == nil {
		t.Error("a byte past the end decoded")
	}
	if _, err := decodeLeaders([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, 2); err == nil {
		t.Error("a count past the answer's size decoded")
	}
}

// FuzzDecodeLeaders: a peer's answer, whatever its bytes, decodes or is refused; never a
// panic, and what decodes encodes back to the same bytes.
func FuzzDecodeLeaders(f *testing.F) {
	f.Add(encodeLeadersOf(nil))
	f.Add(encodeLeadersOf([]leaderClaim{{group: 7, term: 3, inSync: []multiraft.NodeID{2, 4}}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeLeaders(b, 1)
		if err != nil {
			return
		}
		var claims []leaderClaim
		for g, rl := range got {
			claims = append(claims, leaderClaim{group: g, term: rl.Term, inSync: rl.InSync, hw: rl.HighWatermark, start: rl.LogStart})
		}
		again, err := decodeLeaders(encodeLeadersOf(claims), 1)
		if err != nil || len(again) != len(got) {
			t.Fatalf("re-encoded %d groups: %d, %v", len(got), len(again), err)
		}
	})
}
