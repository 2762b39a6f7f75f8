package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestSeedWorkQueue replays step 3 of the seed through the broker: visibility
// 30 s, max receives 3; m1's consumer crashes, m2 always fails, m3 succeeds.
func TestSeedWorkQueue(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "orders-dlq"})
	e.createQueue(QueueSettings{Name: "orders", VisibilityTimeout: 30 * time.Second, MaxReceives: 3, DeadLetterQueue: "orders-dlq"})
	e.send("orders", "charge order 101", "corrupt payload", "charge order 103")
	ids := map[string]string{"charge order 101": "m1", "corrupt payload": "m2", "charge order 103": "m3"}

	start := e.clock.Now()
	var trace []string
	crashed := false
	for step := 0; step < 200; step++ {
		st, _ := e.b.QueueStats("orders")
		if st.Depth() == 0 {
			break
		}
		ds := e.receive("orders", 1)
		if len(ds) == 0 {
			e.clock.Advance(time.Second)
			continue
		}
		d := ds[0]
		now := int(e.clock.Now().Sub(start) / time.Second)
		id := ids[string(d.Body)]
		switch {
		case id == "m1" && !crashed:
			crashed = true
			trace = append(trace, fmt.Sprintf("t=%ds %s received, consumer crashes", now, id))
		case id == "m2":
			trace = append(trace, fmt.Sprintf("t=%ds %s fails, attempt %d", now, id, d.ReceiveCount))
		default:
			err := e.b.Ack(context.Background(), "orders", d.Receipt)
			trace = append(trace, fmt.Sprintf("t=%ds %s done, acked %t", now, id, err == nil))
		}
	}
	want := []string{
		"t=0s m1 received, consumer crashes",
		"t=0s m2 fails, attempt 1",
		"t=0s m3 done, acked true",
		"t=30s m1 done, acked true",
		"t=30s m2 fails, attempt 2",
		"t=60s m2 fails, attempt 3",
	}
	if !slices.Equal(trace, want) {
		t.Fatalf("trace:\n%q\nwant:\n%q", trace, want)
	}
	dl := e.receive("orders-dlq", 10)
	if got := bodies(dl); !slices.Equal(got, []string{"corrupt payload"}) {
		t.Fatalf("dead letters = %q", got)
	}
	info := dl[0].DeadLetter
	if info == nil || info.SourceQueue != "orders" || info.ReceiveCount != 3 {
		t.Fatalf("dead-letter info = %+v", info)
	}
}

func TestStaleReceiptRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q", VisibilityTimeout: 10 * time.Second})
	e.send("q", "job")
	first := e.receive("q", 1)[0]
	e.clock.Advance(11 * time.Second)
	second := e.receive("q", 1)[0]
	if second.FencingToken <= first.FencingToken {
		t.Fatalf("fencing token did not grow: %d then %d", first.FencingToken, second.FencingToken)
	}
	ctx := context.Background()
	for name, op := range map[string]func() error{
		"ack":    func() error { return e.b.Ack(ctx, "q", first.Receipt) },
		"extend": func() error { return e.b.Extend(ctx, "q", first.Receipt, time.Minute) },
		"nack":   func() error { return e.b.Nack(ctx, "q", first.Receipt, 0, "") },
	} {
		if err := op(); !errors.Is(err, ErrReceiptStale) {
			t.Errorf("%s with a stale receipt: %v, want ErrReceiptStale", name, err)
		}
	}
	if err := e.b.Ack(ctx, "q", "garbage"); !errors.Is(err, ErrReceiptInvalid) {
		t.Errorf("malformed receipt: %v", err)
	}
	if err := e.b.Ack(ctx, "q", second.Receipt); err != nil {
		t.Fatalf("current receipt: %v", err)
	}
	if st, _ := e.b.QueueStats("q"); st.Depth() != 0 || st.StaleRefused != 3 {
		t.Fatalf("stats after ack: %+v", st)
	}
}

// TestAckSurvivesCrash: an acknowledged ack is never redelivered, an
// in-flight message comes back, and receive counts survive a power cut.
func TestAckSurvivesCrash(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q", VisibilityTimeout: 30 * time.Second})
	e.send("q", "a", "b", "c")
	ds := e.receive("q", 3)
	if len(ds) != 3 {
		t.Fatalf("received %d", len(ds))
	}
	if err := e.b.Ack(context.Background(), "q", ds[0].Receipt); err != nil {
		t.Fatal(err)
	}
	e.crash()
	e.clock.Advance(31 * time.Second)
	got := e.receive("q", 10)
	if b := bodies(got); !slices.Equal(b, []string{"b", "c"}) {
		t.Fatalf("after crash received %q, want b, c", b)
	}
	for _, d := range got {
		if d.ReceiveCount != 2 {
			t.Errorf("%s receive count %d, want 2", d.Body, d.ReceiveCount)
		}
	}
}

func TestSnapshotAndRestart(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q"})
	ctx := context.Background()
	// Enough events to pass SnapshotEvery (50) several times.
	for i := 0; i < 120; i++ {
		e.send("q", fmt.Sprint(i))
		d := e.receive("q", 1)[0]
		if i%3 != 0 {
			if err := e.b.Ack(ctx, "q", d.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.b.Maintain()
	e.restart()
	if _, err := e.fs.Stat("/data/queues/1-q/snapshot"); err != nil {
		t.Fatalf("no cursor snapshot was written: %v", err)
	}
	e.clock.Advance(time.Minute)
	got := e.receive("q", 1000)
	if len(got) != 40 {
		t.Fatalf("after restart %d messages visible, want the 40 unacked", len(got))
	}
	for _, d := range got {
		var n int
		fmt.Sscan(string(d.Body), &n)
		if n%3 != 0 || d.ReceiveCount != 2 {
			t.Fatalf("unexpected %s count %d", d.Body, d.ReceiveCount)
		}
	}
}

func TestFIFODedupAndOrder(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "f.fifo", FIFO: true, ContentBasedDedup: true})
	ctx := context.Background()
	send := func(group, body string) SendResult {
		res, err := e.b.Send(ctx, "f.fifo", []SendInput{{Body: []byte(body), GroupID: group}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("send: %v %v", err, res[0].Err)
		}
		return res[0]
	}
	a1 := send("a", "a1")
	send("a", "a2")
	send("b", "b1")
	if dup := send("a", "a1"); !dup.Duplicate || dup.ID != a1.ID {
		t.Fatalf("repeat within window: %+v, want duplicate of %s", dup, a1.ID)
	}
	e.restart() // the dedup window survives a restart
	if dup := send("a", "a1"); !dup.Duplicate {
		t.Fatalf("repeat after restart not deduplicated: %+v", dup)
	}
	got := e.receive("f.fifo", 10)
	if b := bodies(got); !slices.Equal(b, []string{"a1", "b1"}) {
		t.Fatalf("first receive %q, want a1 b1 (a2 waits for a1)", b)
	}
	// a1 is nacked with a delay: a2 must still wait.
	if err := e.b.Nack(ctx, "f.fifo", got[0].Receipt, 10*time.Second, "retry"); err != nil {
		t.Fatal(err)
	}
	if b := bodies(e.receive("f.fifo", 10)); len(b) != 0 {
		t.Fatalf("during a1's nack delay received %q", b)
	}
	e.clock.Advance(10 * time.Second)
	again := e.receive("f.fifo", 10)
	if b := bodies(again); !slices.Equal(b, []string{"a1"}) {
		t.Fatalf("after delay %q, want a1", b)
	}
	if err := e.b.Ack(ctx, "f.fifo", again[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if b := bodies(e.receive("f.fifo", 10)); !slices.Equal(b, []string{"a2"}) {
		t.Fatalf("after a1 acked %q, want a2", b)
	}
	e.clock.Advance(6 * time.Minute)
	if dup := send("a", "a1"); dup.Duplicate {
		t.Fatal("deduplicated after the window ended")
	}
}

func TestLongPollWokenBySend(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q"})
	got := make(chan []Delivery, 1)
	go func() {
		ds, _ := e.b.Receive(context.Background(), "q", ReceiveOptions{Max: 1, Wait: time.Hour})
		got <- ds
	}()
	// The receiver may not be waiting yet; a send before it waits is found
	// by its first try, a send after wakes it. Either way it returns the
	// message without any timer firing (the wait is an hour).
	e.send("q", "wake up")
	ds := <-got
	if b := bodies(ds); !slices.Equal(b, []string{"wake up"}) {
		t.Fatalf("long poll got %q", b)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q", MaxMessageBytes: 10})
	e.createQueue(QueueSettings{Name: "f.fifo", FIFO: true})
	ctx := context.Background()
	cases := []struct {
		name  string
		queue string
		in    SendInput
		want  any
	}{
		{"too large", "q", SendInput{Body: make([]byte, 11)}, ErrMessageTooLarge},
		{"group on standard", "q", SendInput{Body: []byte("x"), GroupID: "g"}, new(*InvalidArgumentError)},
		{"no group on fifo", "f.fifo", SendInput{Body: []byte("x"), DedupID: "d"}, new(*InvalidArgumentError)},
		{"no dedup id", "f.fifo", SendInput{Body: []byte("x"), GroupID: "g"}, new(*InvalidArgumentError)},
		{"negative delay", "q", SendInput{Body: []byte("x"), Delay: -time.Second}, new(*InvalidArgumentError)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := e.b.Send(ctx, c.queue, []SendInput{c.in})
			if err != nil {
				t.Fatal(err)
			}
			switch w := c.want.(type) {
			case error:
				if !errors.Is(res[0].Err, w) {
					t.Fatalf("err = %v, want %v", res[0].Err, w)
				}
			case **InvalidArgumentError:
				if !errors.As(res[0].Err, w) {
					t.Fatalf("err = %v, want InvalidArgumentError", res[0].Err)
				}
			}
		})
	}
	for _, q := range []string{"q", "f.fifo"} {
		if st, _ := e.b.QueueStats(q); st.Depth() != 0 {
			t.Fatalf("%s: refused sends stored something: %+v", q, st)
		}
	}
	if _, err := e.b.Send(ctx, "nope", nil); !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("unknown queue: %v", err)
	}
	if _, err := e.b.CreateQueue(QueueSettings{Name: "bad name!"}); err == nil {
		t.Fatal("invalid name accepted")
	}
	if _, err := e.b.CreateQueue(QueueSettings{Name: "q", VisibilityTimeout: 13 * time.Hour}); err == nil {
		t.Fatal("visibility over 12 h accepted")
	}
}

func TestPurgeAndDelete(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q"})
	e.send("q", "a", "b")
	d := e.receive("q", 1)[0]
	if err := e.b.PurgeQueue(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Ack(context.Background(), "q", d.Receipt); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("ack after purge: %v", err)
	}
	e.send("q", "c")
	if b := bodies(e.receive("q", 10)); !slices.Equal(b, []string{"c"}) {
		t.Fatalf("after purge received %q", b)
	}
	if err := e.b.DeleteQueue("q"); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if _, err := e.b.GetQueue("q"); !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("deleted queue after restart: %v", err)
	}
}

func TestAckBatch(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q"})
	e.send("q", "a", "b", "c")
	ds := e.receive("q", 3)
	res, err := e.b.AckBatch(context.Background(), "q", []string{ds[0].Receipt, "junk", ds[2].Receipt, ds[0].Receipt})
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != nil || !errors.Is(res[1], ErrReceiptInvalid) || res[2] != nil || !errors.Is(res[3], ErrReceiptStale) {
		t.Fatalf("results = %v", res)
	}
	e.crash()
	e.clock.Advance(time.Hour)
	if got := bodies(e.receive("q", 10)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after crash %q, want only b", got)
	}
}

func TestFIFODedupWithinOneSend(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "f.fifo", FIFO: true})
	res, err := e.b.Send(context.Background(), "f.fifo", []SendInput{
		{Body: []byte("x"), GroupID: "g", DedupID: "d1"},
		{Body: []byte("x again"), GroupID: "g", DedupID: "d1"},
		{Body: []byte("y"), GroupID: "g", DedupID: "d2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res[1].Duplicate || res[1].ID != res[0].ID || res[1].Sequence != res[0].Sequence {
		t.Fatalf("repeat within one send: %+v, first %+v", res[1], res[0])
	}
	if got := bodies(e.receive("f.fifo", 10)); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("received %q, want only x (y waits behind it)", got)
	}
}

func TestQueueSettingsRules(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "std-dlq"})
	if _, err := e.b.CreateQueue(QueueSettings{Name: "f.fifo", FIFO: true, MaxReceives: 3, DeadLetterQueue: "std-dlq"}); err == nil {
		t.Fatal("a FIFO queue accepted a standard dead-letter queue")
	}
	s, err := e.b.CreateQueue(QueueSettings{Name: "short", Retention: time.Hour})
	if err != nil {
		t.Fatalf("a queue with retention under 12 h: %v", err)
	}
	if s.MaxExtension != time.Hour {
		t.Fatalf("max extension %v, want capped at the 1 h retention", s.MaxExtension)
	}
}

func TestDeleteQueueInUseBySubscription(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "sub-dlq"})
	if _, err := e.b.CreateTopic(TopicSettings{Name: "events", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.CreateSubscription(SubscriptionSettings{Topic: "events", Name: "s", MaxReceives: 2, DeadLetterQueue: "sub-dlq"}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.DeleteQueue("sub-dlq"); !errors.Is(err, ErrQueueInUse) {
		t.Fatalf("deleting a subscription's dead-letter queue: %v, want ErrQueueInUse", err)
	}
}

// DedupScopeGroup: a deduplication id is unique within its message group
// only (SQS's DeduplicationScope=messageGroup), across a restart too; a
// scope change rebuilds the ids seen from the log under the new scope.
func TestDedupScopeMessageGroup(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "hi.fifo", FIFO: true, DedupScope: DedupScopeGroup})
	send := func(group string) SendResult {
		t.Helper()
		res, err := e.b.Send(context.Background(), "hi.fifo", []SendInput{{Body: []byte(group), GroupID: group, DedupID: "same"}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("send to %s: %v %v", group, err, res)
		}
		return res[0]
	}
	if a, b := send("a"), send("b"); a.Duplicate || b.Duplicate {
		t.Fatalf("the same id in two groups was deduplicated: %+v %+v", a, b)
	}
	if again := send("a"); !again.Duplicate {
		t.Fatal("the same id in the same group was not deduplicated")
	}
	e.restart()
	if again := send("b"); !again.Duplicate {
		t.Fatal("after a restart, the same id in the same group was not deduplicated")
	}
	if c := send("c"); c.Duplicate {
		t.Fatal("after a restart, a new group's id was deduplicated")
	}
	if _, err := e.b.UpdateQueue("hi.fifo", func(s *QueueSettings) { s.DedupScope = DedupScopeQueue }); err != nil {
		t.Fatal(err)
	}
	if d := send("d"); !d.Duplicate {
		t.Fatal("with queue scope, an id already sent (in other groups) was not deduplicated")
	}
	if st, _ := e.b.QueueStats("hi.fifo"); st.Sent != 3 {
		t.Fatalf("%d messages stored, want 3 (a, b, c)", st.Sent)
	}
	if _, err := e.b.CreateQueue(QueueSettings{Name: "std", DedupScope: DedupScopeGroup}); err == nil {
		t.Fatal("a standard queue took a deduplication scope")
	}
}

// TestMaxReceivesOverTheCursorLimit: a receive limit the cursor would
// refuse is refused as an invalid max_receives, not an internal error
// (the API answered INTERNAL for --max-receives 1001).
func TestMaxReceivesOverTheCursorLimit(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "dlq"})
	for _, n := range []int{-1, 1001} {
		_, err := e.b.CreateQueue(QueueSettings{Name: "q", MaxReceives: n, DeadLetterQueue: "dlq"})
		var inv *InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != "max_receives" {
			t.Errorf("MaxReceives %d: %v; want an invalid max_receives", n, err)
		}
	}
	if _, err := e.b.CreateQueue(QueueSettings{Name: "q", MaxReceives: 1000, DeadLetterQueue: "dlq"}); err != nil {
		t.Errorf("MaxReceives 1000 (the limit): %v", err)
	}
}
