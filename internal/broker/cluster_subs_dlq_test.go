package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestClusterSubscriptionDeadLetters: a replicated subscription with a redrive policy
// moves a record received more than MaxReceives times to its dead-letter queue (a
// replicated queue), once, with its topic, partition, offset and receive count, and
// never delivers it again. A move stopped after its copy (as a crash there would stop it)
// is finished by the partition's next leader after the old one's power cut: the record is
// in the dead-letter queue exactly once (the copy's key makes the second a duplicate).
// The dead-letter queue cannot be deleted while the subscription names it.
func TestClusterSubscriptionDeadLetters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	t.Cleanup(func() { subMoveHook.Store(nil) }) // after the cluster's own cleanup
	c := newMemCluster(t, 3)
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateQueue(QueueSettings{Name: "dlq"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "t", Name: "s", FromEarliest: true,
			VisibilityTimeout: time.Minute, MaxReceives: 2, DeadLetterQueue: "dlq"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.forwarded(func(b *Broker) error { return b.DeleteQueue("dlq") }); !errors.Is(err, ErrQueueInUse) {
		t.Fatalf("delete of the subscription's dead-letter queue: %v, want ErrQueueInUse", err)
	}

	c.featureLevelIs(meta.MaxFeatureLevel) // the copies carry the record's time (LevelDeadLetterHistory)
	produced := time.Now()
	c.produceTo("t", "poison", 1) // offset 0
	c.produceTo("t", "fine", 2)   // 1, 2
	time.Sleep(20 * time.Millisecond)
	c.drainExcept(t, "t", "s", "poison", 2) // MaxReceives deliveries; the receive after moves it
	first := c.deadLetters(t, "dlq", 1)
	m := first[0].Message
	if string(m.Body) != "poison-0" || m.DeadLetter == nil || m.DeadLetter.SourceQueue != "t/s" || m.DeadLetter.ReceiveCount != 2 ||
		m.System["sluice.topic"] != "t" || m.System["sluice.offset"] != "0" {
		t.Fatalf("dead-letter copy %+v (dead letter %+v, system %v)", m, m.DeadLetter, m.System)
	}
	if m.SentAt.Before(produced.Add(-time.Second)) || !m.SentAt.Before(m.DeadLetter.At) {
		t.Errorf("the copy's send time %v, moved at %v: want the record's (produced about %v), before the move", m.SentAt, m.DeadLetter.At, produced)
	}
	// Every replica counts the dead letter once it has applied the receive that moved it.
	for _, id := range c.ids {
		c.eventually(t, fmt.Sprintf("n%d counts the dead letter", id), func() error {
			st, err := c.nodes[id].b.SubscriptionStats("t", "s")
			if err != nil || st.DeadLettered != 1 {
				return fmt.Errorf("stats %+v %v", st, err)
			}
			return nil
		})
	}

	// The next poison record's move stops after its copy on the partition's leader, whose
	// power is then cut: the new leader copies it again, deduplicated. The leader is the
	// one whose move the hook stopped first: under load, leadership can move between a
	// look-up here and the move (a -count=10 run failed with "no copy made" when the hook
	// waited for the leader seen before the produce).
	var stopped atomic.Pointer[partitionRT]
	copied := make(chan struct{}, 100)
	hook := func(stage string, p *partitionRT) bool {
		if p.topic != "t" {
			return true
		}
		if stopped.CompareAndSwap(nil, p); stopped.Load() != p {
			return true
		}
		copied <- struct{}{}
		return false
	}
	subMoveHook.Store(&hook)
	c.produceTo("t", "poison", 1) // offset 3
	c.drainExcept(t, "t", "s", "poison", 2)
	select {
	case <-copied:
	case <-time.After(20 * time.Second):
		t.Fatal("no copy made")
	}
	var lid multiraft.NodeID
	for _, id := range c.ids {
		if _, p, err := c.nodes[id].b.streams.partition("t", 0); err == nil && p == stopped.Load() {
			lid = id
		}
	}
	if lid == 0 {
		t.Fatal("the move stopped on a partition no node hosts")
	}
	c.crash(lid, true)
	got := c.deadLetters(t, "dlq", 1) // the new leader's copy of offset 3, answered as a duplicate
	c.start(lid)
	if string(got[0].Message.Body) != "poison-0" || got[0].Message.System["sluice.offset"] != "3" {
		t.Fatalf("second dead letter %s at %s, want poison-0 at offset 3", got[0].Message.Body, got[0].Message.System["sluice.offset"])
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left int
		for _, id := range c.ids {
			if _, p, err := c.nodes[id].b.streams.partition("t", 0); err == nil && p.repl.Load() != nil {
				left += p.repl.Load().sm.DeadCount(subIDOf(t, c, "t", "s"))
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters still wait for their copies on the replicas", left)
		}
	}
	if extra := c.receiveQueue(t, "dlq", 10); len(extra) != 0 {
		t.Fatalf("the dead-letter queue holds %d more copies: the move was not deduplicated", len(extra))
	}
	c.cursorsAgree(t, "t", 1)
}

// drainExcept receives the subscription's records, nacking (visible again at once) every
// one whose value starts with poison and acking the others, until poison records were
// delivered rounds times and a receive then comes back empty.
func (c *memCluster) drainExcept(t *testing.T, topic, sub, poison string, rounds int) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var got []SubscriptionDelivery
		if err := c.forwarded(func(b *Broker) (err error) {
			got, err = b.SubscriptionReceive(ctx, topic, sub, ReceiveOptions{Max: 10})
			return err
		}); err != nil && !errors.Is(err, ErrSubscriptionNotFound) {
			t.Fatalf("receive: %v", err)
		}
		if len(got) == 0 {
			if rounds <= 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("nothing more to receive in 20 s")
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for _, d := range got {
			var err error
			if strings.HasPrefix(string(d.Value), poison) {
				rounds--
				err = c.forwarded(func(b *Broker) error { return b.SubscriptionNack(ctx, topic, sub, d.Receipt, 0, "poison") })
			} else {
				err = c.forwarded(func(b *Broker) error { return b.SubscriptionAck(ctx, topic, sub, d.Receipt) })
			}
			if err != nil {
				t.Fatalf("settle offset %d: %v", d.Offset, err)
			}
		}
	}
}

// deadLetters waits (bounded) for n messages in a queue, acks them and returns them.
func (c *memCluster) deadLetters(t *testing.T, queueName string, n int) []Delivery {
	t.Helper()
	var out []Delivery
	for deadline := time.Now().Add(20 * time.Second); len(out) < n; time.Sleep(20 * time.Millisecond) {
		out = append(out, c.receiveQueue(t, queueName, n-len(out))...)
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d dead letters in %s after 20 s", len(out), n, queueName)
		}
	}
	return out
}

// receiveQueue receives up to max messages of a queue through whoever leads it and acks
// them.
func (c *memCluster) receiveQueue(t *testing.T, queueName string, max int) []Delivery {
	t.Helper()
	ctx := context.Background()
	var got []Delivery
	if err := c.forwarded(func(b *Broker) (err error) {
		got, err = b.Receive(ctx, queueName, ReceiveOptions{Max: max})
		return err
	}); err != nil {
		t.Fatalf("receive from %s: %v", queueName, err)
	}
	for _, d := range got {
		if err := c.forwarded(func(b *Broker) error { return b.Ack(ctx, queueName, d.Receipt) }); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	return got
}

// subIDOf is a catalog subscription's id.
func subIDOf(t *testing.T, c *memCluster, topic, name string) uint64 {
	t.Helper()
	for _, id := range c.ids {
		if b := c.nodes[id].b; b != nil {
			if s, err := b.cluster.subscription(topic, name); err == nil {
				return s.ID
			}
		}
	}
	t.Fatalf("subscription %s/%s not found", topic, name)
	return 0
}
