package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
)

// TestClusterDeadLetterHistory: in a cluster at LevelDeadLetterHistory, a message moved to
// its dead-letter queue keeps what a single node's dead-letter record keeps — its original
// send time (SQS's SentTimestamp; before, the time of the move), its first receive, the
// last nack's reason — and says when it was moved; a dead letter of that dead-letter queue
// keeps the original send time still.
func TestClusterDeadLetterHistory(t *testing.T) {
	c := newQCluster(t, 3)
	c.eventually("the cluster at the dead-letter history's level", func() error {
		for _, id := range c.ids {
			if l := c.nodes[id].b.cluster.meta.State().FeatureLevel(); l < meta.LevelDeadLetterHistory {
				return fmt.Errorf("n%d at level %d", id, l)
			}
		}
		return nil
	})
	ctx := context.Background()
	src, dlq := dlqPair(t, c, "hist", false)
	// The dead-letter queue's own dead letters go to a third queue.
	ml := c.metaLeader()
	if _, err := ml.b.CreateQueue(QueueSettings{Name: "last"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ml.b.UpdateQueue(dlq, func(s *QueueSettings) { s.MaxReceives, s.DeadLetterQueue = 1, "last" }); err != nil {
		t.Fatal(err)
	}
	sl := c.queueLeader(src)
	sent := sendOne(t, sl.b, src, "m")
	sentAt := time.Now()
	time.Sleep(30 * time.Millisecond) // the move comes measurably later than the send

	// Two receives, the second nacked with a reason; the third receive moves it.
	var first time.Time
	for i := range 2 {
		var ds []Delivery
		c.eventually("the message delivered", func() error {
			var err error
			ds, err = c.queueLeader(src).b.Receive(ctx, src, ReceiveOptions{Max: 1, Visibility: time.Minute})
			if err == nil && len(ds) != 1 {
				err = errors.New("nothing delivered")
			}
			return err
		})
		if i == 0 {
			first = ds[0].FirstReceivedAt
			if err := c.queueLeader(src).b.Nack(ctx, src, ds[0].Receipt, 0, ""); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := c.queueLeader(src).b.Nack(ctx, src, ds[0].Receipt, 0, "downstream 503"); err != nil {
			t.Fatal(err)
		}
	}
	var dead Delivery
	c.eventually("the message in the dead-letter queue", func() error {
		if _, err := c.queueLeader(src).b.Receive(ctx, src, ReceiveOptions{Max: 1}); err != nil {
			return err
		}
		ds, err := c.queueLeader(dlq).b.Receive(ctx, dlq, ReceiveOptions{Max: 1, Visibility: time.Minute})
		if err == nil && len(ds) != 1 {
			err = errors.New("not there yet")
		}
		if err == nil {
			dead = ds[0]
		}
		return err
	})
	dl := dead.DeadLetter
	switch {
	case dead.ID != sent.ID || dl == nil || dl.SourceQueue != src || dl.ReceiveCount != 2:
		t.Fatalf("dead letter %+v, history %+v", dead.Message, dl)
	case dead.SentAt.After(sentAt) || sentAt.Sub(dead.SentAt) > time.Second:
		t.Errorf("SentAt %v, want the original send (about %v), not the move", dead.SentAt, sentAt)
	case !dl.At.After(dead.SentAt) || dl.At.Before(dl.LastReceiveAt):
		t.Errorf("moved at %v: want after the send (%v) and the last receive (%v)", dl.At, dead.SentAt, dl.LastReceiveAt)
	case !dl.FirstReceiveAt.Equal(time.UnixMilli(first.UnixMilli())) || dl.Reason != "downstream 503":
		t.Errorf("history %+v, want first receive %v and reason %q", dl, first, "downstream 503")
	}

	// Its dead-letter queue lets it be received once: the next receive moves it on.
	if err := c.queueLeader(dlq).b.Nack(ctx, dlq, dead.Receipt, 0, ""); err != nil {
		t.Fatal(err)
	}
	// A redrive preview of the replicated dead-letter queue, on its leader (elsewhere
	// NOT_LEADER, which the front-ends forward); before, QUEUE_NOT_FOUND on every node.
	dl0 := c.queueLeader(dlq)
	p, err := dl0.b.PreviewRedrive(RedriveRequest{Source: dlq}, 5)
	if err != nil || p.Count != 1 || len(p.Destinations) != 1 || p.Destinations[0].Queue != src || len(p.Sample) != 1 || p.Sample[0].Message.ID != sent.ID {
		t.Fatalf("preview on the dead-letter queue's leader: %+v %v", p, err)
	}
	for _, id := range c.ids {
		if nd := c.nodes[id]; nd != dl0 {
			var nl *NotLeaderError
			if _, err := nd.b.PreviewRedrive(RedriveRequest{Source: dlq}, 5); !errors.As(err, &nl) || nl.Leader != int32(dl0.id) {
				t.Errorf("preview on n%d: %v, want NOT_LEADER naming n%d", id, err, dl0.id)
			}
		}
	}
	c.eventually("the message in the last queue", func() error {
		if _, err := c.queueLeader(dlq).b.Receive(ctx, dlq, ReceiveOptions{Max: 1}); err != nil {
			return err
		}
		ds, err := c.queueLeader("last").b.Receive(ctx, "last", ReceiveOptions{Max: 1, Visibility: time.Minute})
		if err == nil && len(ds) != 1 {
			return errors.New("not there yet")
		}
		if err != nil {
			return err
		}
		if d := ds[0]; d.ID != sent.ID || !d.SentAt.Equal(dead.SentAt) || d.DeadLetter == nil || d.DeadLetter.SourceQueue != dlq {
			t.Fatalf("the dead letter's dead letter: %+v, history %+v; want id %s sent at %v from %s", d.Message, d.DeadLetter, sent.ID, dead.SentAt, dlq)
		}
		return nil
	})
}
