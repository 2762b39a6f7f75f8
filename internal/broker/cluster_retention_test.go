package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestRetentionInClusterIsTheLeaders: a replicated partition's time retention is the
// leader's trim, applied by every replica at the same point of the group's log. The
// followers' own maintenance, past the retention on their clocks, cuts nothing (before,
// each replica cut its own log on its own: the replicas served other records, and the
// subscription's cursor, fed from each replica's log as receives apply, could lease other
// records on a follower than the leader answered). The leader's pass trims every replica
// to the start of its last segment, expires the subscription's leases below it, and the
// cut survives a replica's power cut with the cursors equal everywhere.
func TestRetentionInClusterIsTheLeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	ctx := context.Background()
	clock := newClock()
	c := newMemClusterClock(t, 3, 512, clock.Now)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "t", Partitions: 1, Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := c.via(2, func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "t", Name: "s", FromEarliest: true, VisibilityTimeout: time.Minute})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("t", "r", 40)
	held := c.receiveSome(t, "t", "s", 2)
	if held[0].Offset != 0 {
		t.Fatalf("first delivery at %d, want 0", held[0].Offset)
	}

	clock.Advance(2 * time.Hour) // every record is past the retention, on every node's clock
	l := c.leaderOf("t", 0)
	for _, id := range c.ids {
		if b := c.nodes[id].b; b != l {
			b.Maintain()
		}
	}
	time.Sleep(100 * time.Millisecond) // a trim a follower proposed would have applied by now
	c.startsAre(t, "t", 0)

	_, lp, err := l.streams.partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	bases, _ := lp.log.SegmentSizes()
	want := bases[len(bases)-1] // retention deletes whole segments: the active one stays
	if len(bases) < 3 || want <= 2 {
		t.Fatalf("the leader's log has segments at %v: the test wants several", bases)
	}
	l.Maintain()
	c.startsAre(t, "t", want)
	if err := c.forwarded(func(b *Broker) error { return b.SubscriptionAck(ctx, "t", "s", held[0].Receipt) }); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("ack of a lease retention expired: %v, want ErrReceiptStale", err)
	}
	// What the cut left in the active segment is past the retention too, on the cursors'
	// clock (the brokers', carried by their entries): the cursor expires it rather than
	// deliver it, and the next delivery is the first record produced after the cut.
	c.produceTo("t", "fresh", 1)
	if next := c.receiveSome(t, "t", "s", 1); next[0].Offset != 40 {
		t.Fatalf("receive after retention: offset %d, want 40 (the first record within the retention)", next[0].Offset)
	}
	c.cursorsAgree(t, "t", 1)

	// A follower's power cut after more records and a checkpoint or two: it comes back
	// with the leader's cut, and its cursor with the others'.
	var cut multiraft.NodeID
	for _, id := range c.ids {
		if c.nodes[id].b != c.leaderOf("t", 0) {
			cut = id
		}
	}
	c.produceTo("t", "later", 30)
	c.crash(cut, true)
	c.start(cut)
	c.startsAre(t, "t", want)
	c.cursorsAgree(t, "t", 1)
}

// TestSizeRetentionInClusterKeepsUnfinished: a replicated partition's size retention
// stops at the subscriptions' lowest unfinished offset, as a single node's does: over
// its size, nothing is cut while the subscription has read nothing, and once it has
// finished every record the leader's trim cuts every replica alike.
func TestSizeRetentionInClusterKeepsUnfinished(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	ctx := context.Background()
	c := newMemClusterSegments(t, 3, 512)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "u", Partitions: 1, Retention: -1, RetentionBytes: 600}); err != nil {
		t.Fatal(err)
	}
	if err := c.via(3, func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "u", Name: "s", FromEarliest: true, VisibilityTimeout: time.Minute})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("u", "r", 40)
	first := c.receiveSome(t, "u", "s", 1) // the subscription's cursor is in place
	for _, id := range c.ids {
		c.nodes[id].b.Maintain()
	}
	time.Sleep(100 * time.Millisecond)
	c.startsAre(t, "u", 0)

	if err := c.forwarded(func(b *Broker) error { return b.SubscriptionAck(ctx, "u", "s", first[0].Receipt) }); err != nil {
		t.Fatalf("ack %d: %v", first[0].Offset, err)
	}
	for done := 0; done < 40; {
		for _, d := range c.receiveSome(t, "u", "s", 10) {
			if err := c.forwarded(func(b *Broker) error { return b.SubscriptionAck(ctx, "u", "s", d.Receipt) }); err != nil {
				t.Fatalf("ack %d: %v", d.Offset, err)
			}
			done = max(done, int(d.Offset)+1)
		}
	}
	l := c.leaderOf("u", 0)
	_, lp, err := l.streams.partition("u", 0)
	if err != nil {
		t.Fatal(err)
	}
	bases, sizes := lp.log.SegmentSizes()
	total, want := int64(0), int64(0)
	for _, sz := range sizes {
		total += sz
	}
	for i := 0; i+1 < len(bases) && total-sizes[i] >= 600; i++ {
		total -= sizes[i]
		want = bases[i+1]
	}
	if want == 0 {
		t.Fatalf("segments %v of %v bytes: nothing over the size limit", bases, sizes)
	}
	l.Maintain()
	c.startsAre(t, "u", want)
	c.cursorsAgree(t, "u", 1)
}

// receiveSome receives up to max deliveries of topic's subscription through whoever
// leads, waiting (bounded) until there is at least one.
func (c *memCluster) receiveSome(t *testing.T, topic, sub string, max int) []SubscriptionDelivery {
	t.Helper()
	var got []SubscriptionDelivery
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0; time.Sleep(10 * time.Millisecond) {
		if err := c.forwarded(func(b *Broker) (err error) {
			got, err = b.SubscriptionReceive(context.Background(), topic, sub, ReceiveOptions{Max: max})
			return err
		}); err != nil && !errors.Is(err, ErrSubscriptionNotFound) {
			t.Fatalf("receive: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscription delivered nothing in 10 s")
		}
	}
	return got
}
