package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// TestClusterReceiptsAreAuthenticated: once the cluster has its receipt key, a replicated
// queue's and a subscription's receipts are the authenticated format, and a receipt made
// from what a delivery shows (its offset and fencing token), in the first cluster format or
// under another key, or one of another queue, settles nothing; the real one opens on the
// leader after a failover.
func TestClusterReceiptsAreAuthenticated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	c.featureLevelIs(meta.MaxFeatureLevel)
	ctx := context.Background()
	for _, q := range []string{"jobs", "other"} {
		if err := c.forwarded(func(b *Broker) error {
			_, err := b.CreateQueue(QueueSettings{Name: q})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.forwarded(func(b *Broker) error {
			_, err := b.Send(ctx, q, []SendInput{{Body: []byte("m-" + q)}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(q string) Delivery {
		t.Helper()
		var ds []Delivery
		if err := c.forwarded(func(b *Broker) (err error) {
			ds, err = b.Receive(ctx, q, ReceiveOptions{Max: 1})
			return err
		}); err != nil || len(ds) != 1 {
			t.Fatalf("receive %s: %d %v", q, len(ds), err)
		}
		if strings.Contains(ds[0].Receipt, ".") {
			t.Fatalf("receipt %q is the first, unauthenticated, format", ds[0].Receipt)
		}
		return ds[0]
	}
	d, other := receive("jobs"), receive("other")
	g := c.upBroker(0).cluster.meta.State().Queues["jobs"].Group
	cursor := queue.Receipt{Offset: d.Sequence, Token: d.FencingToken}.String()
	stranger := newReceiptKey(make([]byte, meta.ReceiptKeyLen))
	for _, f := range []struct {
		what, receipt string
		want          error
	}{
		{"the first cluster format", fmt.Sprintf("c%d.%s", g, cursor), ErrReceiptStale},
		{"the cursor's own", cursor, ErrReceiptStale}, // what a single node says of its first format
		{"another key", receiptBinding{key: stranger, kind: receiptOfQueue, id: uint64(g)}.issue(0, d.Sequence, d.FencingToken), ErrReceiptInvalid},
		{"another queue's", other.Receipt, ErrReceiptInvalid},
	} {
		if err := c.forwarded(func(b *Broker) error { return b.Ack(ctx, "jobs", f.receipt) }); !errors.Is(err, f.want) {
			t.Errorf("ack with a receipt of %s: %v, want %v", f.what, err, f.want)
		}
	}

	// The two stale answers are counted by the leader, as a single node counts its own.
	var st QueueStats
	if err := c.forwarded(func(b *Broker) (err error) {
		st, err = b.QueueStats("jobs")
		return err
	}); err != nil || st.StaleRefused != 2 || st.Acked != 0 {
		t.Errorf("stats after the refusals: %+v %v, want 2 stale refused, none acked", st, err)
	}

	// Nothing was settled: the leader changes, and the real receipt acks there.
	c.crash(c.queueLeaderID(t, "jobs"), false)
	if err := c.forwarded(func(b *Broker) error { return b.Ack(ctx, "jobs", d.Receipt) }); err != nil {
		t.Fatalf("ack on the new leader: %v", err)
	}
	if err := c.forwarded(func(b *Broker) error { return b.Ack(ctx, "jobs", d.Receipt) }); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("second ack: %v, want ErrReceiptStale", err)
	}

	// A subscription's, likewise.
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateTopic(TopicSettings{Name: "t", Partitions: 1})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "t", Name: "s", FromEarliest: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("t", "r", 1)
	var sd []SubscriptionDelivery
	for range 20 {
		if err := c.forwarded(func(b *Broker) (err error) {
			sd, err = b.SubscriptionReceive(ctx, "t", "s", ReceiveOptions{Max: 1, Wait: time.Second})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(sd) == 1 {
			break
		}
	}
	if len(sd) != 1 || strings.Contains(sd[0].Receipt, ".") {
		t.Fatalf("subscription deliveries %+v", sd)
	}
	id := subIDOf(t, c, "t", "s")
	sc := queue.Receipt{Offset: sd[0].Offset, Token: sd[0].FencingToken}.String()
	for _, f := range []struct {
		what, receipt string
		want          error
	}{
		{"the first cluster format", fmt.Sprintf("s%d.0.%s", id, sc), ErrReceiptStale},
		{"another key", receiptBinding{key: stranger, kind: receiptOfSub, id: id}.issue(0, sd[0].Offset, sd[0].FencingToken), ErrReceiptInvalid},
		{"a queue's", d.Receipt, ErrReceiptInvalid},
	} {
		if err := c.forwarded(func(b *Broker) error { return b.SubscriptionAck(ctx, "t", "s", f.receipt) }); !errors.Is(err, f.want) {
			t.Errorf("subscription ack with a receipt of %s: %v, want %v", f.what, err, f.want)
		}
	}
	if err := c.forwarded(func(b *Broker) error { return b.SubscriptionAck(ctx, "t", "s", sd[0].Receipt) }); err != nil {
		t.Fatalf("subscription ack: %v", err)
	}
	if err := c.forwarded(func(b *Broker) error { return b.SubscriptionAck(ctx, "t", "s", sd[0].Receipt) }); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("second subscription ack: %v, want ErrReceiptStale", err)
	}
	var stale uint64 // counted by the partition's leader only
	for _, n := range c.ids {
		if c.nodes[n].b == nil {
			continue // the node crashed above
		}
		st, err := c.nodes[n].b.SubscriptionStats("t", "s")
		if err != nil {
			t.Fatal(err)
		}
		stale += st.StaleRefused
	}
	if stale != 1 {
		t.Errorf("the nodes counted %d stale subscription receipts, want 1", stale)
	}
}

// queueLeaderID is the node leading a replicated queue (bounded wait).
func (c *memCluster) queueLeaderID(t *testing.T, name string) multiraft.NodeID {
	t.Helper()
	var id multiraft.NodeID
	c.eventually(t, "a leader of "+name, func() error {
		for _, n := range c.ids {
			if b := c.nodes[n].b; b != nil {
				if _, _, err := b.cluster.leaderQueue(name); err == nil {
					id = n
					return nil
				}
			}
		}
		return errors.New("none")
	})
	return id
}

// FuzzOpenClusterReceipt: no input panics either opener, with or without a key; what
// opens under a key is exactly a receipt the key issued for that queue or subscription.
func FuzzOpenClusterReceipt(f *testing.F) {
	k := newReceiptKey(make([]byte, meta.ReceiptKeyLen))
	cursor := queue.Receipt{Offset: 7, Token: 3}.String()
	for _, s := range []string{
		receiptBinding{key: k, kind: receiptOfQueue, id: 5}.issue(0, 7, 3),
		receiptBinding{key: k, kind: receiptOfSub, id: 5}.issue(2, 7, 3),
		"c5." + cursor, "s5.2." + cursor, cursor, "", ".", "s5..", "c5.",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, keyed bool) {
		key := k
		if !keyed {
			key = nil
		}
		if cr, err := openClusterQueueReceipt(key, 5, s); err == nil && keyed {
			r, err := queue.ParseReceipt(cr)
			if err != nil || (receiptBinding{key: k, kind: receiptOfQueue, id: 5}).issue(0, r.Offset, r.Token) != s {
				t.Fatalf("%q opened as the queue's %q (%v), which the key would not issue so", s, cr, err)
			}
		}
		if p, cr, err := openClusterSubReceipt(key, 5, s); err == nil && keyed {
			r, err := queue.ParseReceipt(cr)
			if err != nil || (receiptBinding{key: k, kind: receiptOfSub, id: 5}).issue(int(p), r.Offset, r.Token) != s {
				t.Fatalf("%q opened as the subscription's %d/%q (%v), which the key would not issue so", s, p, cr, err)
			}
		}
	})
}
