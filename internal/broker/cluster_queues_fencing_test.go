package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClusterQueueFencingAndFirstReceive: a replicated queue's deliveries carry what a
// single node's do — a fencing token that grows with every delivery, across a failover
// too, and the time of the first delivery, kept by later ones (SQS's
// ApproximateFirstReceiveTimestamp). Before, both were zero in a cluster, so a downstream
// system fencing by token (client/inbox) could not tell a stale worker from a live one.
func TestClusterQueueFencingAndFirstReceive(t *testing.T) {
	c := newQCluster(t, 3)
	ctx := context.Background()
	if _, err := c.metaLeader().b.CreateQueue(QueueSettings{Name: "fenced"}); err != nil {
		t.Fatal(err)
	}
	l := c.queueLeader("fenced")
	sendOne(t, l.b, "fenced", "m")
	receive := func(b *Broker) Delivery {
		t.Helper()
		var ds []Delivery
		c.eventually("the message is delivered", func() error {
			var err error
			ds, err = b.Receive(ctx, "fenced", ReceiveOptions{Max: 1, Visibility: 50 * time.Millisecond})
			if err == nil && len(ds) != 1 {
				err = errors.New("nothing delivered")
			}
			return err
		})
		return ds[0]
	}
	first := receive(l.b)
	if first.FencingToken == 0 || first.FirstReceivedAt.IsZero() {
		t.Fatalf("first delivery: fencing token %d, first received %v; want both set", first.FencingToken, first.FirstReceivedAt)
	}
	second := receive(l.b) // its lease ran out: delivered again
	if second.FencingToken <= first.FencingToken || !second.FirstReceivedAt.Equal(first.FirstReceivedAt) || second.ReceiveCount != 2 {
		t.Fatalf("second delivery: token %d after %d, first received %v (was %v), count %d",
			second.FencingToken, first.FencingToken, second.FirstReceivedAt, first.FirstReceivedAt, second.ReceiveCount)
	}
	if err := l.b.Ack(ctx, "fenced", first.Receipt); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("the first, fenced receipt: %v, want stale", err)
	}
	c.stop(l.id)
	nl := c.queueLeader("fenced")
	third := receive(nl.b)
	if third.FencingToken <= second.FencingToken || !third.FirstReceivedAt.Equal(first.FirstReceivedAt) {
		t.Fatalf("after the failover: token %d after %d, first received %v (was %v)",
			third.FencingToken, second.FencingToken, third.FirstReceivedAt, first.FirstReceivedAt)
	}
	if err := nl.b.Ack(ctx, "fenced", third.Receipt); err != nil {
		t.Fatal(err)
	}
}
