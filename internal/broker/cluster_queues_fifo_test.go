package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func receiveAll(t *testing.T, b *Broker, queue string, vis time.Duration) []Delivery {
	t.Helper()
	ds, err := b.Receive(context.Background(), queue, ReceiveOptions{Max: 10, Visibility: vis})
	if err != nil {
		t.Fatalf("receive from %s: %v", queue, err)
	}
	return ds
}

func bodiesOf(ds []Delivery) string {
	s := ""
	for _, d := range ds {
		s += string(d.Body) + " "
	}
	return s
}

// TestClusterFIFOQueue: a FIFO queue's groups and deduplication in a cluster, across a
// power cut of its leader: a batch keeps its order, one message of a group is in flight,
// a retry after the failover is answered with the original message, and purge empties it.
func TestClusterFIFOQueue(t *testing.T) {
	c := newQCluster(t, 3)
	if _, err := c.metaLeader().b.CreateQueue(QueueSettings{Name: "orders.fifo", FIFO: true}); err != nil {
		t.Fatal(err)
	}
	l := c.queueLeader("orders.fifo")
	ctx := context.Background()
	in := []SendInput{
		{Body: []byte("a1"), GroupID: "a", DedupID: "d1"}, {Body: []byte("a2"), GroupID: "a", DedupID: "d2"},
		{Body: []byte("b1"), GroupID: "b", DedupID: "d3"}, {Body: []byte("again"), GroupID: "a", DedupID: "d1"},
		{Body: []byte("nogroup"), DedupID: "d4"},
	}
	rs, err := l.b.Send(ctx, "orders.fifo", in)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err != nil || !rs[3].Duplicate || rs[3].ID != rs[0].ID || rs[1].Duplicate || rs[4].Err == nil {
		t.Fatalf("send results %+v", rs)
	}
	ds := receiveAll(t, l.b, "orders.fifo", time.Minute)
	if bodiesOf(ds) != "a1 b1 " || ds[0].GroupID != "a" || ds[0].DedupID != "d1" || ds[0].ID != rs[0].ID {
		t.Fatalf("first receive %q %+v", bodiesOf(ds), ds)
	}

	c.stop(l.id) // a power cut: the engine keeps what it synced
	nl := c.queueLeader("orders.fifo")
	// Within the window, a retry on the new leader is the original.
	again, err := nl.b.Send(ctx, "orders.fifo", in[1:2])
	if err != nil || !again[0].Duplicate || again[0].ID != rs[1].ID {
		t.Fatalf("retry after the failover: %+v %v, want a duplicate of %s", again, err, rs[1].ID)
	}
	if ds2 := receiveAll(t, nl.b, "orders.fifo", time.Minute); len(ds2) != 0 {
		t.Fatalf("a group's next message while its head is in flight: %q", bodiesOf(ds2))
	}
	if err := nl.b.Ack(ctx, "orders.fifo", ds[0].Receipt); err != nil {
		t.Fatalf("ack on the new leader: %v", err)
	}
	if ds2 := receiveAll(t, nl.b, "orders.fifo", time.Minute); bodiesOf(ds2) != "a2 " {
		t.Fatalf("after the head's ack: %q", bodiesOf(ds2))
	}
	if _, err := nl.b.Send(ctx, "orders.fifo", []SendInput{{Body: []byte("c1"), GroupID: "c", DedupID: "d5"}}); err != nil {
		t.Fatal(err)
	}
	if err := nl.b.PurgeQueue(ctx, "orders.fifo"); err != nil {
		t.Fatal(err)
	}
	if st, err := nl.b.QueueStats("orders.fifo"); err != nil || st.Depth() != 0 {
		t.Fatalf("after the purge: %+v %v", st, err)
	}
	if ds2 := receiveAll(t, nl.b, "orders.fifo", time.Minute); len(ds2) != 0 {
		t.Fatalf("after the purge: %q", bodiesOf(ds2))
	}
}

// dlqPair creates a queue and a dead-letter queue for it that another node leads, so the
// move goes through a request to that node.
func dlqPair(t *testing.T, c *qcluster, src string, fifo bool) (string, string) {
	t.Helper()
	l := c.metaLeader()
	var srcLeader string
	var dlq string
	for i := range 20 {
		name, source := fmt.Sprint("dlq", i), fmt.Sprint(src, i)
		if fifo {
			name, source = name+".fifo", source+".fifo"
		}
		if _, err := l.b.CreateQueue(QueueSettings{Name: name, FIFO: fifo}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.b.CreateQueue(QueueSettings{Name: source, FIFO: fifo, MaxReceives: 2, DeadLetterQueue: name}); err != nil {
			t.Fatal(err)
		}
		if c.queueLeader(name) != c.queueLeader(source) {
			dlq, srcLeader = name, source
			break
		}
	}
	if dlq == "" {
		t.Fatal("no dead-letter queue placed apart from its source")
	}
	if sl, dl := c.queueLeader(srcLeader), c.queueLeader(dlq); sl == dl {
		t.Fatalf("both queues led by n%d", sl.id)
	}
	return srcLeader, dlq
}

// exhaust receives from queue until every one of n messages was received max times (the
// next receive dead-letters them).
func exhaust(t *testing.T, c *qcluster, queue string, n, receives int) {
	t.Helper()
	counts := map[string]int{}
	c.eventually("every message received "+fmt.Sprint(receives)+" times", func() error {
		nd := c.queueLeader(queue)
		ds, err := nd.b.Receive(context.Background(), queue, ReceiveOptions{Max: 10, Visibility: 20 * time.Millisecond})
		if err != nil {
			return err
		}
		for _, d := range ds {
			counts[string(d.Body)] = d.ReceiveCount
		}
		done := 0
		for _, k := range counts {
			if k >= receives {
				done++
			}
		}
		if done < n {
			return fmt.Errorf("%d of %d received %d times", done, n, receives)
		}
		return nil
	})
}

// TestClusterDeadLetterPowerCut: messages over maxReceiveCount move to a dead-letter queue
// led by another node; the source's leader loses power after the copies are committed in
// the dead-letter queue and before the source drops them. The new leader finishes the
// move: each message is in the dead-letter queue exactly once (the copy's key dedups the
// second copy), with its id and where it came from, and none is left in the source. A
// redrive then moves them back.
func TestClusterDeadLetterPowerCut(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprint("fifo=", fifo), func(t *testing.T) { deadLetterPowerCut(t, fifo) })
	}
}

func deadLetterPowerCut(t *testing.T, fifo bool) {
	t.Cleanup(func() { moveHook.Store(nil) }) // after the cluster's own cleanup
	c := newQCluster(t, 3)
	src, dlq := dlqPair(t, c, "src", fifo)
	sl := c.queueLeader(src)
	ctx := context.Background()
	ids := map[string]string{}
	for i := range 5 {
		in := SendInput{Body: []byte(fmt.Sprint("m", i))}
		if fifo {
			in.GroupID, in.DedupID = fmt.Sprint("g", i), fmt.Sprint("d", i)
		}
		rs, err := sl.b.Send(ctx, src, []SendInput{in})
		if err != nil || rs[0].Err != nil {
			t.Fatalf("send: %v %+v", err, rs)
		}
		ids[string(in.Body)] = rs[0].ID
	}
	// The old leader's moves stop after the copy, as a power cut there would.
	oldH := sl.b.cluster.hostedQueue(src)
	copied := make(chan struct{}, 100)
	hook := func(stage string, h *hostedQueue) bool {
		if h != oldH {
			return true
		}
		copied <- struct{}{}
		return false
	}
	moveHook.Store(&hook)
	exhaust(t, c, src, 5, 2)
	c.eventually("a receive over the limit dead-letters", func() error {
		if _, err := sl.b.Receive(ctx, src, ReceiveOptions{Max: 10}); err != nil {
			return err
		}
		if d := oldH.sm.Depth().Dead; d != 5 {
			return fmt.Errorf("%d dead letters", d)
		}
		return nil
	})
	select {
	case <-copied:
	case <-time.After(20 * time.Second):
		t.Fatal("no copy made")
	}
	c.stop(sl.id)

	nl := c.queueLeader(src)
	c.eventually("the new leader finishes the move", func() error {
		if d := nl.b.cluster.hostedQueue(src).sm.Depth(); d.Dead != 0 || d.Visible+d.InFlight+d.Delayed != 0 {
			return fmt.Errorf("source holds %+v", d)
		}
		return nil
	})
	dl := c.queueLeader(dlq)
	got := map[string]int{}
	c.eventually("the dead letters received", func() error {
		for _, d := range receiveAll(t, dl.b, dlq, time.Minute) {
			got[string(d.Body)]++
			if d.ID != ids[string(d.Body)] || d.DeadLetter == nil || d.DeadLetter.SourceQueue != src || d.DeadLetter.ReceiveCount != 2 {
				return fmt.Errorf("dead letter %+v (id %s, want %s)", d.Message, d.ID, ids[string(d.Body)])
			}
			if err := dl.b.Nack(ctx, dlq, d.Receipt, 0, ""); err != nil {
				return err
			}
		}
		if len(got) < 5 {
			return fmt.Errorf("%d of 5 dead letters", len(got))
		}
		return nil
	})
	if st, err := dl.b.QueueStats(dlq); err != nil || st.Depth() != 5 {
		t.Fatalf("the dead-letter queue holds %+v %v, want each message once", st, err)
	}

	// Redrive: on the dead-letter queue's leader only; the messages go back with their ids.
	for _, id := range c.ids {
		if nd := c.nodes[id]; nd.up && nd != dl {
			if _, err := nd.b.StartRedrive(RedriveRequest{Source: dlq}); !errors.As(err, new(*NotLeaderError)) {
				t.Fatalf("redrive on n%d, not the leader: %v", id, err)
			}
		}
	}
	task, err := dl.b.StartRedrive(RedriveRequest{Source: dlq})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if task, err = dl.b.WaitRedrive(wctx, task.ID); err != nil || task.Status != RedriveCompleted || task.Moved != 5 {
		t.Fatalf("redrive: %+v %v", task, err)
	}
	back := map[string]bool{}
	c.eventually("the redriven messages received", func() error {
		for _, d := range receiveAll(t, nl.b, src, time.Minute) {
			if d.ID != ids[string(d.Body)] || d.DeadLetter != nil {
				return fmt.Errorf("redriven %+v", d.Message)
			}
			back[string(d.Body)] = true
			if err := nl.b.Ack(ctx, src, d.Receipt); err != nil {
				return err
			}
		}
		if len(back) < 5 {
			return fmt.Errorf("%d of 5 back", len(back))
		}
		return nil
	})
	if st, err := dl.b.QueueStats(dlq); err != nil || st.Depth() != 0 {
		t.Fatalf("the dead-letter queue after the redrive: %+v %v", st, err)
	}
}
