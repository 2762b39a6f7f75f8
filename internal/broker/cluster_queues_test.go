package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func sendOne(t *testing.T, b *Broker, queue, body string) SendResult {
	t.Helper()
	rs, err := b.Send(context.Background(), queue, []SendInput{{Body: []byte(body),
		Attributes: map[string]Attribute{"k": {DataType: "String", Value: []byte("v-" + body)}}}})
	if err != nil {
		t.Fatalf("send %s: %v", body, err)
	}
	if rs[0].Err != nil {
		t.Fatalf("send %s: %v", body, rs[0].Err)
	}
	return rs[0]
}

// TestClusterQueueCatalog: queues are the catalog's; what replqueue lacks is refused.
func TestClusterQueueCatalog(t *testing.T) {
	c := newQCluster(t, 3)
	l := c.metaLeader()
	var follower *qnode
	for _, id := range c.ids {
		if c.nodes[id] != l {
			follower = c.nodes[id]
			break
		}
	}
	var nl *NotLeaderError
	if _, err := follower.b.CreateQueue(QueueSettings{Name: "jobs"}); !errors.As(err, &nl) || !nl.Catalog || nl.Leader != int32(l.id) {
		t.Fatalf("create on a follower: %v, want NotLeaderError naming n%d", err, l.id)
	}
	s, err := l.b.CreateQueue(QueueSettings{Name: "jobs", VisibilityTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := l.b.CreateQueue(QueueSettings{Name: "jobs", VisibilityTimeout: time.Second}); err != nil || again.ID != s.ID {
		t.Fatalf("identical create: %+v %v", again, err)
	}
	if _, err := l.b.CreateQueue(QueueSettings{Name: "jobs", VisibilityTimeout: 2 * time.Second}); !errors.Is(err, ErrQueueExists) {
		t.Fatalf("different create: %v", err)
	}
	// A dead-letter queue must be a catalog queue of the same kind.
	if _, err := l.b.CreateQueue(QueueSettings{Name: "withdlq", MaxReceives: 3, DeadLetterQueue: "nope"}); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("a missing dead-letter queue: %v", err)
	}
	if _, err := l.b.CreateQueue(QueueSettings{Name: "f.fifo", FIFO: true, MaxReceives: 3, DeadLetterQueue: "jobs"}); !errors.As(err, new(*InvalidArgumentError)) {
		t.Errorf("a standard dead-letter queue for a FIFO queue: %v", err)
	}
	for _, id := range c.ids {
		nd := c.nodes[id]
		c.eventually(fmt.Sprintf("n%d sees the queue", id), func() error {
			if got := nd.b.ListQueues(""); !slices.Equal(got, []string{"jobs"}) {
				return fmt.Errorf("ListQueues %v", got)
			}
			if g, err := nd.b.GetQueue("jobs"); err != nil || g.VisibilityTimeout != time.Second {
				return fmt.Errorf("GetQueue %+v %v", g, err)
			}
			return nil
		})
	}
	up, err := l.b.UpdateQueue("jobs", func(s *QueueSettings) { s.VisibilityTimeout = 3 * time.Second })
	if err != nil || up.VisibilityTimeout != 3*time.Second {
		t.Fatalf("update: %+v %v", up, err)
	}

	// Only the leader serves messages; the others name it (once they heard from it: until
	// then they answer NOT_LEADER with no leader known).
	ql := c.queueLeader("jobs")
	for _, id := range c.ids {
		if nd := c.nodes[id]; nd != ql {
			c.eventually(fmt.Sprintf("n%d names the queue's leader", id), func() error {
				_, err := nd.b.Send(context.Background(), "jobs", []SendInput{{Body: []byte("x")}})
				if !errors.As(err, &nl) || nl.Catalog {
					t.Fatalf("send on n%d: %v, want NotLeaderError naming n%d", id, err, ql.id)
				}
				if nl.Leader != int32(ql.id) {
					return fmt.Errorf("send on n%d: %v, want NotLeaderError naming n%d", id, err, ql.id)
				}
				return nil
			})
		}
	}

	// Every replica reports the queue's group and its leader.
	for _, id := range c.ids {
		nd := c.nodes[id]
		c.eventually(fmt.Sprintf("n%d's status lists the queue", id), func() error {
			st, err := nd.b.ClusterStatus()
			if err != nil {
				return err
			}
			if len(st.Queues) != 1 || st.Queues[0].Queue != "jobs" || st.Queues[0].Leader != int32(ql.id) || len(st.Queues[0].Replicas) != 3 {
				return fmt.Errorf("queues %+v", st.Queues)
			}
			return nil
		})
	}

	if err := l.b.DeleteQueue("jobs"); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.ids {
		nd := c.nodes[id]
		c.eventually(fmt.Sprintf("n%d drops the queue", id), func() error {
			if got := nd.b.ListQueues(""); len(got) != 0 {
				return fmt.Errorf("ListQueues %v", got)
			}
			if h := nd.b.cluster.hostedQueue("jobs"); h != nil {
				return fmt.Errorf("still hosts group %d", h.group)
			}
			return nil
		})
	}
}

// TestClusterQueueFailover: messages sent and received on one leader survive its crash;
// a receipt issued by the old leader acks on the new one; an acked message never comes
// back; an unacked one is redelivered after its visibility.
func TestClusterQueueFailover(t *testing.T) {
	c := newQCluster(t, 3)
	if _, err := c.metaLeader().b.CreateQueue(QueueSettings{Name: "jobs", VisibilityTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	l := c.queueLeader("jobs")
	sent := map[string]string{} // body -> id
	for i := range 20 {
		r := sendOne(t, l.b, "jobs", fmt.Sprint("m", i))
		sent[fmt.Sprint("m", i)] = r.ID
	}
	ds, err := l.b.Receive(context.Background(), "jobs", ReceiveOptions{Max: 10, Visibility: time.Minute})
	if err != nil || len(ds) != 10 {
		t.Fatalf("receive: %d %v", len(ds), err)
	}
	for _, d := range ds {
		if sent[string(d.Body)] != d.ID || string(d.Attributes["k"].Value) != "v-"+string(d.Body) {
			t.Fatalf("delivery %+v does not match what was sent", d)
		}
	}
	acked := map[string]bool{}
	for _, d := range ds[:5] {
		if err := l.b.Ack(context.Background(), "jobs", d.Receipt); err != nil {
			t.Fatal(err)
		}
		acked[string(d.Body)] = true
	}
	if err := l.b.Ack(context.Background(), "jobs", ds[0].Receipt); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("second ack: %v", err)
	}
	if err := l.b.Ack(context.Background(), "jobs", "c999."+ds[6].Receipt); !errors.Is(err, ErrReceiptInvalid) {
		t.Fatalf("a receipt of another group: %v", err)
	}
	st, err := l.b.QueueStats("jobs")
	if err != nil || st.Visible != 10 || st.InFlight != 5 || st.Sent != 20 || st.Received != 10 || st.Acked != 5 {
		t.Fatalf("stats %+v %v", st, err)
	}

	c.stop(l.id)
	nl := c.queueLeader("jobs")
	if nl == l {
		t.Fatal("the stopped node still leads")
	}
	// Receipts the old leader issued (committed) are valid on the new one.
	for _, d := range ds[5:8] {
		if err := nl.b.Ack(context.Background(), "jobs", d.Receipt); err != nil {
			t.Fatalf("ack on the new leader of a receipt from the old: %v", err)
		}
		acked[string(d.Body)] = true
	}
	// ds[8], ds[9] are in flight for a minute; release them now.
	for _, d := range ds[8:] {
		if err := nl.b.Nack(context.Background(), "jobs", d.Receipt, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 12 && time.Now().Before(deadline) {
		ds, err := nl.b.Receive(context.Background(), "jobs", ReceiveOptions{Max: 10, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if acked[string(d.Body)] {
				t.Fatalf("acked message %s delivered again", d.Body)
			}
			got[string(d.Body)]++
			if err := nl.b.Ack(context.Background(), "jobs", d.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 12 {
		t.Fatalf("after the failover got %d of the 12 unacked messages: %v", len(got), got)
	}
	// The new leader's replica counted what the old one did: every message received first
	// once (a visibility running out under load may add redeliveries) and acked once.
	st, err = nl.b.QueueStats("jobs")
	if err != nil || st.Received-st.Redelivered != 20 || st.Redelivered < 2 || st.Acked != 20 {
		t.Fatalf("stats on the new leader %+v %v", st, err)
	}

	// The restarted node catches up and hosts the queue again.
	c.start(l.id, false)
	c.eventually("the restarted node hosts the queue", func() error {
		h := l.b.cluster.hostedQueue("jobs")
		if h == nil {
			return errors.New("not hosted")
		}
		if d := h.sm.Depth(); d.Sent != 20 || d.Visible+d.InFlight+d.Delayed != 0 ||
			d.Received != st.Received || d.Acked != 20 {
			return fmt.Errorf("replica holds %+v", d)
		}
		return nil
	})
}

// TestClusterQueueLongPoll: a receive waiting on the leader returns as soon as a send
// commits, without proposing a Receive per wake-up.
func TestClusterQueueLongPoll(t *testing.T) {
	c := newQCluster(t, 3)
	if _, err := c.metaLeader().b.CreateQueue(QueueSettings{Name: "jobs"}); err != nil {
		t.Fatal(err)
	}
	l := c.queueLeader("jobs")
	h := l.b.cluster.hostedQueue("jobs")
	before := h.sm.Stats().Applied
	start := time.Now()
	ds, err := l.b.Receive(context.Background(), "jobs", ReceiveOptions{Wait: 300 * time.Millisecond})
	if err != nil || len(ds) != 0 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("empty long poll: %v %v after %v", ds, err, time.Since(start))
	}
	if after := h.sm.Stats().Applied; after != before {
		t.Fatalf("an empty long poll proposed %d entries", after-before)
	}
	type res struct {
		ds  []Delivery
		err error
		at  time.Duration
	}
	done := make(chan res, 1)
	start = time.Now()
	go func() {
		ds, err := l.b.Receive(context.Background(), "jobs", ReceiveOptions{Wait: 10 * time.Second})
		done <- res{ds, err, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond)
	sendOne(t, l.b, "jobs", "wake")
	r := <-done
	if r.err != nil || len(r.ds) != 1 || string(r.ds[0].Body) != "wake" || r.at > 5*time.Second {
		t.Fatalf("long poll: %+v", r)
	}
	// A delayed message wakes a waiting receive when its delay runs out.
	rs, err := l.b.Send(context.Background(), "jobs", []SendInput{{Body: []byte("later"), Delay: 500 * time.Millisecond}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	start = time.Now()
	ds, err = l.b.Receive(context.Background(), "jobs", ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || len(ds) != 1 || string(ds[0].Body) != "later" || time.Since(start) > 3*time.Second {
		t.Fatalf("delayed: %v %v after %v", ds, err, time.Since(start))
	}
}

// TestClusterQueueBatchKeepsItsOrder: the messages of one send reach a standard queue in
// the order given, as on a single node (each was a proposal of its own, made
// concurrently, and a batch of five came back as m5, m2, m1, m4, m3).
func TestClusterQueueBatchKeepsItsOrder(t *testing.T) {
	c := newQCluster(t, 3)
	if _, err := c.metaLeader().b.CreateQueue(QueueSettings{Name: "ordered"}); err != nil {
		t.Fatal(err)
	}
	l := c.queueLeader("ordered")
	var in []SendInput
	for i := range 10 {
		in = append(in, SendInput{Body: []byte(fmt.Sprint("m", i))})
	}
	res, err := l.b.Send(context.Background(), "ordered", in)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(res); i++ {
		if res[i].Err != nil || res[i].Sequence <= res[i-1].Sequence {
			t.Fatalf("results %+v: not in the order sent", res)
		}
	}
	ds, err := l.b.Receive(context.Background(), "ordered", ReceiveOptions{Max: 10, Visibility: time.Minute})
	if err != nil || len(ds) != 10 {
		t.Fatalf("receive: %d %v", len(ds), err)
	}
	for i, d := range ds {
		if want := fmt.Sprint("m", i); string(d.Body) != want {
			t.Fatalf("delivery %d is %q, want %q", i, d.Body, want)
		}
	}
}
