package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestClusterQueuePeek: a replicated queue is peeked as a single node's is — every
// unfinished message in order with its state, body and attributes, nothing changed — on
// its leader; a follower answers NOT_LEADER naming the leader (the front-ends forward
// it). A dead letter peeked in its dead-letter queue says where it came from. Before, a
// peek of any replicated queue answered QUEUE_NOT_FOUND, so the console's queue page was
// a 404 on every node of a cluster.
func TestClusterQueuePeek(t *testing.T) {
	ctx := context.Background()
	c := newQCluster(t, 3)
	ml := c.metaLeader()
	if _, err := ml.b.CreateQueue(QueueSettings{Name: "dlq"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ml.b.CreateQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq"}); err != nil {
		t.Fatal(err)
	}
	l := c.queueLeader("src")
	var in []SendInput
	for i := range 3 {
		in = append(in, SendInput{Body: []byte(fmt.Sprint("m", i)),
			Attributes: map[string]Attribute{"n": {DataType: "Number", Value: []byte(fmt.Sprint(i))}}})
	}
	if _, err := l.b.Send(ctx, "src", in); err != nil {
		t.Fatal(err)
	}
	ds, err := l.b.Receive(ctx, "src", ReceiveOptions{Max: 1, Visibility: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %v", ds, err)
	}
	before, _ := l.b.QueueStats("src")
	res, err := l.b.PeekQueue("src", PeekOptions{Max: 10})
	if err != nil {
		t.Fatalf("peek on the leader: %v", err)
	}
	var got []string
	for _, p := range res.Messages {
		got = append(got, fmt.Sprintf("%s/%s/%s/%d", p.Message.Body, p.Message.Attributes["n"].Value, p.State, p.ReceiveCount))
	}
	if want := "m0/0/in_flight/1 m1/1/visible/0 m2/2/visible/0"; strings.Join(got, " ") != want || res.Next != res.End {
		t.Errorf("peek: %s (next %d, end %d), want %s", strings.Join(got, " "), res.Next, res.End, want)
	}
	if res.Messages[0].Message.ID != ds[0].ID {
		t.Errorf("peeked id %s, received id %s", res.Messages[0].Message.ID, ds[0].ID)
	}
	after, _ := l.b.QueueStats("src")
	after.OldestAge, before.OldestAge = 0, 0 // the clock moves on
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the peek changed the queue: %+v, was %+v", after, before)
	}
	for _, id := range c.ids {
		if nd := c.nodes[id]; nd != l {
			c.eventually(fmt.Sprintf("n%d's peek names the leader", id), func() error { // once it hosts its replica
				var nl *NotLeaderError
				if _, err := nd.b.PeekQueue("src", PeekOptions{}); !errors.As(err, &nl) || nl.Leader != int32(l.id) {
					return fmt.Errorf("peek on follower n%d: %v, want NOT_LEADER naming n%d", id, err, l.id)
				}
				return nil
			})
		}
	}

	// m0 back and received again: past MaxReceives, it goes to the dead-letter queue.
	if err := l.b.Nack(ctx, "src", ds[0].Receipt, 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.b.Receive(ctx, "src", ReceiveOptions{Max: 3, Visibility: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c.eventually("the dead letter peeked in the dead-letter queue", func() error {
		dl := c.queueLeader("dlq")
		res, err := dl.b.PeekQueue("dlq", PeekOptions{})
		if err != nil || len(res.Messages) != 1 {
			return fmt.Errorf("peek dlq: %+v %v", res, err)
		}
		m := res.Messages[0]
		if string(m.Message.Body) != "m0" || m.Message.DeadLetter == nil || m.Message.DeadLetter.SourceQueue != "src" || m.State != "visible" {
			return fmt.Errorf("dead letter peeked as %+v (%+v)", m, m.Message.DeadLetter)
		}
		return nil
	})
}
