package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestDeleteRecordsInCluster: DeleteRecords on a replicated partition runs on its leader
// (a follower answers NOT_LEADER naming it) and moves every replica's log start to the
// same offset; a subscription's lease on a deleted record is stale and its next receive
// starts at the new start; an offset past the high watermark changes nothing; -1 is the
// high watermark. A replica that loses power right after comes back with the moved start
// (its log kept the start in memory; the entry is applied again after the crash), and so
// does one that was down while it happened.
func TestDeleteRecordsInCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	ctx := context.Background()
	c := newMemCluster(t, 3)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.via(2, func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "t", Name: "s", FromEarliest: true, VisibilityTimeout: time.Minute})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("t", "r", 10)
	// The partition's leader gives it its cursor a moment after the create answered.
	var held []SubscriptionDelivery
	for deadline := time.Now().Add(10 * time.Second); len(held) == 0; time.Sleep(10 * time.Millisecond) {
		if err := c.forwarded(func(b *Broker) (err error) {
			held, err = b.SubscriptionReceive(ctx, "t", "s", ReceiveOptions{Max: 2})
			return err
		}); err != nil && !errors.Is(err, ErrSubscriptionNotFound) {
			t.Fatalf("receive: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscription delivered nothing in 10 s")
		}
	}
	if len(held) != 2 || held[0].Offset != 0 {
		t.Fatalf("receive: %+v, want offsets 0 and 1", held)
	}

	l := c.leaderOf("t", 0)
	for _, id := range c.ids {
		if b := c.nodes[id].b; b != l {
			_, err := b.DeleteRecords(ctx, "t", 0, 4)
			var nl *NotLeaderError
			if !errors.As(err, &nl) || nl.Leader == 0 {
				t.Fatalf("n%d: DeleteRecords on a follower: %v, want NotLeaderError naming the leader", id, err)
			}
		}
	}
	if low, err := l.DeleteRecords(ctx, "t", 0, 4); err != nil || low != 4 {
		t.Fatalf("DeleteRecords to 4 on the leader: %d, %v", low, err)
	}
	c.startsAre(t, "t", 4)
	if err := c.forwarded(func(b *Broker) error { return b.SubscriptionAck(ctx, "t", "s", held[0].Receipt) }); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("ack of a deleted record's lease: %v, want ErrReceiptStale", err)
	}
	var next []SubscriptionDelivery
	if err := c.forwarded(func(b *Broker) (err error) {
		next, err = b.SubscriptionReceive(ctx, "t", "s", ReceiveOptions{Max: 1})
		return err
	}); err != nil || len(next) != 1 || next[0].Offset != 4 {
		t.Fatalf("receive after DeleteRecords: %+v %v, want offset 4", next, err)
	}
	if low, err := l.DeleteRecords(ctx, "t", 0, 11); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the high watermark: %d, %v", low, err)
	}
	c.startsAre(t, "t", 4)

	// One replica down while the next DeleteRecords happens, another's power cut right
	// after it: both come back with the moved start.
	var down, cut multiraft.NodeID
	for _, id := range c.ids {
		switch {
		case c.nodes[id].b == l:
		case down == 0:
			down = id
		default:
			cut = id
		}
	}
	c.crash(down, false)
	c.produceTo("t", "r", 2) // 10, 11
	l = c.leaderOf("t", 0)
	if low, err := l.DeleteRecords(ctx, "t", 0, -1); err != nil || low != 12 {
		t.Fatalf("DeleteRecords to the high watermark: %d, %v, want 12", low, err)
	}
	// Past a snapshot (every 25 entries here) the restart does not apply the trim again:
	// the moved start must be on the disk itself when the power goes.
	c.produceTo("t", "s", 30)
	c.startsAre(t, "t", 12)
	c.crash(cut, true)
	c.start(down)
	c.start(cut)
	c.startsAre(t, "t", 12)
	c.cursorsAgree(t, "t", 1)
}

// startsAre waits (bounded) until every live replica of topic's partition 0 starts at want
// (a node down is skipped).
func (c *memCluster) startsAre(t *testing.T, topic string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range c.ids {
		if c.nodes[id].b == nil {
			continue
		}
		for {
			var start int64 = -1
			if _, p, err := c.nodes[id].b.streams.partition(topic, 0); err == nil {
				start = p.log.LogStartOffset()
			}
			if start == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("n%d: %s/0 starts at %d, want %d", id, topic, start, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
