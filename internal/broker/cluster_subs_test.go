package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// upBroker is the broker of the first node up after skip (round robin over the ids).
func (c *memCluster) upBroker(skip int) *Broker {
	for i := range c.ids {
		if nd := c.nodes[c.ids[(skip+i)%len(c.ids)]]; nd.b != nil {
			return nd.b
		}
	}
	return nil
}

// forwarded runs f on b and, on NOT_LEADER naming a live node, once more there: what the
// SQS and native front-ends do. Leader unknown, a closed broker or an outcome unknown are
// retried (bounded) from the next node up.
func (c *memCluster) forwarded(f func(*Broker) error) error {
	var err error
	deadline := time.Now().Add(30 * time.Second) // a slow machine's elections, under -race
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		b := c.upBroker(attempt)
		err = f(b)
		var nl *NotLeaderError
		if errors.As(err, &nl) && nl.Leader != 0 {
			if nd := c.nodes[multiraft.NodeID(nl.Leader)]; nd != nil && nd.b != nil {
				err = f(nd.b)
			}
		}
		// Not found too: a controller elected a moment ago may not have applied its log
		// yet (docs/cluster.md, "What is not replicated yet"); nor may one that committed a
		// topic created through another node, which returns once it applied it itself
		// (TestClusterSubscriptionDeadLetters failed so once under load).
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrReplicationUnknown) &&
			!errors.Is(err, ErrSubscriptionNotFound) && !errors.Is(err, ErrTopicNotFound) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// via runs f on node id's broker and, on NOT_LEADER naming another node, once there.
func (c *memCluster) via(id multiraft.NodeID, f func(*Broker) error) error {
	// A topic created through another node a moment ago may not be in this node's
	// catalog yet (ErrTopicNotFound): a client retries that, and so does this, for 5 s.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := f(c.nodes[id].b)
		var nl *NotLeaderError
		if errors.As(err, &nl) && nl.Leader != 0 && c.nodes[multiraft.NodeID(nl.Leader)].b != nil {
			err = f(c.nodes[multiraft.NodeID(nl.Leader)].b)
		}
		if !errors.Is(err, ErrTopicNotFound) || time.Now().After(deadline) {
			return err
		}
	}
}

type subKeyOff struct {
	p   int32
	off int64
}

// TestClusterSubscriptionSurvivesCrashes: a subscription created through one node of a
// three-broker cluster (MemFS, crashes) is known on every node; its records are received
// and acked through whichever node leads each partition (NOT_LEADER is forwarded, as the
// front-ends do) while nodes lose power or are killed and come back. No record acked is
// delivered again, every acknowledged produce is delivered, and every replica ends with
// the same cursor. On main's code the subscription was local to the node that created
// it: the other nodes did not know it.
func TestClusterSubscriptionSurvivesCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	if _, err := c.nodes[2].b.CreateTopic(TopicSettings{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.via(3, func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "t", Name: "s", FromEarliest: true,
			VisibilityTimeout: 2 * time.Second})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.ids {
		var s SubscriptionSettings
		if err := c.via(id, func(b *Broker) (err error) { s, err = b.GetSubscription("t", "s"); return err }); err != nil || s.ID == 0 {
			t.Fatalf("n%d: GetSubscription: %+v %v", id, s, err)
		}
	}
	if err := c.via(1, func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "t", Name: "s"})
		return err
	}); !errors.Is(err, ErrSubscriptionExists) {
		t.Fatalf("second create through another node: %v, want ErrSubscriptionExists", err)
	}
	rng := rand.New(rand.NewSource(3))
	stored := map[subKeyOff]bool{}
	acked := map[subKeyOff]bool{}
	maybe := map[subKeyOff]bool{} // an ack of unknown outcome
	delivered, redelivered := 0, 0
	next := 0
	produce := func(n int) {
		for range n {
			p := int32(next % 2)
			v := fmt.Sprint(next)
			next++
			var off int64
			err := c.forwarded(func(b *Broker) error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				if b := c.leaderOf("t", p); b != nil {
					res, err := b.Produce(ctx, "t", []ProduceRecord{{Value: []byte(v), Partition: &p}}, ProduceOptions{})
					if err == nil {
						off = res[0].Offset
					}
					return err
				}
				return ErrNotLeader
			})
			if err == nil {
				stored[subKeyOff{p, off}] = true
			}
		}
	}
	consume := func(rounds int, ackAll bool) int {
		got := 0
		for range rounds {
			var ds []SubscriptionDelivery
			err := c.forwarded(func(b *Broker) error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				var err error
				ds, err = b.SubscriptionReceive(ctx, "t", "s", ReceiveOptions{Max: 10})
				return err
			})
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			for _, d := range ds {
				k := subKeyOff{d.Partition, d.Offset}
				if acked[k] {
					t.Fatalf("t/%d@%d delivered (count %d) after its ack answered", d.Partition, d.Offset, d.ReceiveCount)
				}
				delivered++
				got++
				if d.ReceiveCount > 1 {
					redelivered++
				}
				if !ackAll && rng.Intn(4) == 0 {
					continue // left to come back after its visibility
				}
				err := c.forwarded(func(b *Broker) error {
					return b.SubscriptionAck(context.Background(), "t", "s", d.Receipt)
				})
				switch {
				case err == nil:
					acked[k] = true
				case errors.Is(err, ErrReceiptStale):
					// its lease ran out and it was delivered again meanwhile
				default:
					maybe[k] = true
				}
			}
		}
		return got
	}
	rounds := envInt("SLUICE_CLUSTER_CUTS", 4)
	for round := range rounds {
		produce(30)
		consume(4, false)
		victim := c.ids[rng.Intn(len(c.ids))]
		c.crash(victim, round%2 == 0)
		produce(20)
		consume(3, false)
		c.start(victim)
	}
	// Drain: an hour is not needed, the visibility is 2 s.
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := 0
		for k := range stored {
			if !acked[k] && !maybe[k] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acknowledged records never delivered and acked (%d stored, %d acked)", missing, len(stored), len(acked))
		}
		if consume(1, true) == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("%d stored, %d deliveries, %d of them redeliveries, %d acks of unknown outcome", len(stored), delivered, redelivered, len(maybe))
	c.cursorsAgree(t, "t", 2)
}

// cursorsAgree waits (bounded) until every replica of topic's partitions holds the same
// subscription cursors, byte for byte.
func (c *memCluster) cursorsAgree(t *testing.T, topic string, parts int32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for p := range parts {
		for {
			var first []byte
			same, seen := true, 0
			for _, id := range c.ids {
				_, part, err := c.nodes[id].b.streams.partition(topic, p)
				if err != nil || part.repl.Load() == nil {
					same = false
					break
				}
				cs := part.repl.Load().sm.Cursors()
				if len(cs) != 1 {
					same = false
					break
				}
				if seen == 0 {
					first = cs[0].Snapshot
				} else if string(first) != string(cs[0].Snapshot) {
					same = false
				}
				seen++
			}
			if same {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("t/%d: the replicas' cursors differ after 20 s", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
