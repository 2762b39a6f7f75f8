package broker

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// TestCacheServesWhatTheLogHolds: a message handed out from the recent
// cache must be exactly what a read of the log returns for it (times cut to
// milliseconds, empty maps as nil, dead-letter history kept), whatever the
// sender put in, and nothing the sender changes afterwards may show through.
func TestCacheServesWhatTheLogHolds(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, s := range []QueueSettings{{Name: "std"}, {Name: "fifo.fifo", FIFO: true, ContentBasedDedup: true}} {
		if _, err := e.b.CreateQueue(s); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(1234567 * time.Nanosecond) // a time that is not a whole millisecond
	dl := &Message{ID: "kept-id", SentAt: e.clock.Now().Add(-time.Hour + 777*time.Microsecond),
		DeadLetter: &DeadLetterInfo{SourceQueue: "src", ReceiveCount: 3, FirstReceiveAt: e.clock.Now().Add(-time.Minute + 5),
			LastReceiveAt: e.clock.Now().Add(-time.Second + 9), Reason: "bad payload"}}
	cases := []struct {
		queue string
		in    SendInput
		keep  *Message
	}{
		{"std", SendInput{Body: []byte("plain")}, nil},
		{"std", SendInput{Body: nil}, nil},
		{"std", SendInput{Body: []byte("attrs"), Attributes: map[string]Attribute{"a": {DataType: "String", Value: []byte("x")}, "empty": {DataType: "Binary"}},
			System: map[string]string{"AWSTraceHeader": "Root=1"}}, nil},
		{"std", SendInput{Body: []byte("empty maps"), Attributes: map[string]Attribute{}, System: map[string]string{}}, nil},
		{"std", SendInput{Body: []byte("delayed"), Delay: 1500*time.Millisecond + 3}, nil},
		{"std", SendInput{Body: []byte("dead"), NoDelay: true}, dl},
		{"fifo.fifo", SendInput{Body: []byte("grouped"), GroupID: "g1", DedupID: "d1"}, nil},
		{"fifo.fifo", SendInput{Body: []byte("content dedup"), GroupID: "g2"}, nil},
	}
	for i, c := range cases {
		q, err := e.b.queue(c.queue)
		if err != nil {
			t.Fatal(err)
		}
		var keep []*Message
		if c.keep != nil {
			keep = []*Message{c.keep}
		}
		res, err := q.send(ctx, []SendInput{c.in}, keep)
		if err != nil || res[0].Err != nil {
			t.Fatalf("case %d: send: %v %v", i, err, res)
		}
		off := res[0].Sequence
		// The sender reuses its buffers.
		if len(c.in.Body) > 0 {
			c.in.Body[0] ^= 0xff
		}
		for k := range c.in.Attributes {
			c.in.Attributes[k] = Attribute{DataType: "changed"}
		}
		q.mu.Lock()
		cached := q.cache.get(off)
		q.mu.Unlock()
		if cached == nil {
			t.Fatalf("case %d: message at %d not cached", i, off)
		}
		stored, err := readMessages(q.log, []int64{off})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cached, stored[off]) {
			t.Errorf("case %d: cached\n%+v\nlog\n%+v", i, *cached, *stored[off])
		}
	}
}

// TestCacheForgetsAckedAndStaysInWindow: an ack drops the message from the
// cache, and a backlog beyond the cursor's window is not cached at all, so
// memory does not grow with the backlog.
func TestCacheForgetsAckedAndStaysInWindow(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.b.CreateQueue(QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	q, _ := e.b.queue("q")
	window := queue.DefaultLookahead
	in := make([]SendInput, 100)
	for i := range in {
		in[i] = SendInput{Body: []byte("m")}
	}
	for range 3 * window / len(in) {
		if _, err := e.b.Send(ctx, "q", in); err != nil {
			t.Fatal(err)
		}
	}
	cachedCount := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		n := 0
		for _, s := range q.cache.slots {
			if s.m != nil {
				n++
			}
		}
		if n != q.cache.held {
			t.Fatalf("the cache counts %d held, its slots hold %d", q.cache.held, n)
		}
		return n
	}
	if n := cachedCount(); n != window {
		t.Fatalf("%d messages cached after sending %d, want the window of %d", n, 3*window, window)
	}
	ds, err := e.b.Receive(ctx, "q", ReceiveOptions{Max: 10})
	if err != nil || len(ds) != 10 {
		t.Fatalf("receive: %v, %d", err, len(ds))
	}
	for _, d := range ds {
		if err := e.b.Ack(ctx, "q", d.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	if n := cachedCount(); n != window-10 {
		t.Fatalf("%d messages cached after acking 10, want %d", n, window-10)
	}
}

// TestCacheEmptiesWhenNobodyConsumes: maintenance drops cached messages older
// than recentCacheAge, so a queue nobody reads holds no message bodies.
func TestCacheEmptiesWhenNobodyConsumes(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.b.CreateQueue(QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	q, _ := e.b.queue("q")
	e.send("q", "a", "b", "c")
	held := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.cache.bytes
	}
	e.b.Maintain()
	if held() != 3 {
		t.Fatalf("cache holds %d bytes right after the send, want 3", held())
	}
	e.clock.Advance(recentCacheAge + time.Millisecond)
	e.b.Maintain()
	if held() != 0 {
		t.Fatalf("cache holds %d bytes after %v unread, want 0", held(), recentCacheAge)
	}
	if got := bodies(e.receive("q", 10)); len(got) != 3 {
		t.Fatalf("received %v after the cache emptied, want the 3 messages from the log", got)
	}
}

// An idle queue holds no cache slots: they are allocated by the first send
// and given back by maintenance once nothing is cached, so 100,000 queues
// at rest cost no window each.
func TestIdleQueueHoldsNoCache(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q"})
	q := e.b.queues["q"]
	slots := func() []cacheSlot { q.mu.Lock(); defer q.mu.Unlock(); return q.cache.slots }
	if slots() != nil {
		t.Fatal("a new queue holds cache slots")
	}
	e.send("q", "a", "b")
	if slots() == nil {
		t.Fatal("a send while the cursor has room cached nothing")
	}
	for _, d := range e.receive("q", 2) {
		if err := e.b.Ack(context.Background(), "q", d.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(2 * recentCacheAge)
	e.b.Maintain()
	if slots() != nil {
		t.Fatal("an idle queue kept its cache slots")
	}
}
