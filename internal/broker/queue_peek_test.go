package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

func peekBodies(ms []PeekedMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Message.Body)
	}
	return out
}

// A peek shows every unfinished message with its state (acked ones left
// out), pages by Next, and changes nothing: the queue's stats are the
// same after it, and a receive gets the visible messages with their
// receive counts as if no peek had happened.
func TestPeekQueueShowsStatesAndChangesNothing(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q"})
	e.send("q", "m0", "m1", "m2")
	if _, err := e.b.Send(context.Background(), "q", []SendInput{{Body: []byte("later"), Delay: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	e.send("q", "m4")
	ds := e.receive("q", 2) // m0 and m1 in flight
	if err := e.b.Ack(context.Background(), "q", ds[0].Receipt); err != nil {
		t.Fatal(err)
	}
	before, _ := e.b.QueueStats("q")

	res, err := e.b.PeekQueue("q", PeekOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := peekBodies(res.Messages), []string{"m1", "m2", "later", "m4"}; !slices.Equal(got, want) {
		t.Fatalf("peek = %q, want %q", got, want)
	}
	states := []string{"in_flight", "visible", "delayed", "visible"}
	for i, m := range res.Messages {
		if m.State != states[i] {
			t.Errorf("%s: state %s, want %s", m.Message.Body, m.State, states[i])
		}
	}
	if m := res.Messages[0]; m.ReceiveCount != 1 || m.VisibleAt.IsZero() || m.Message.ID != ds[1].ID {
		t.Errorf("in-flight message = %+v", m)
	}
	if res.Next != res.End || res.End != 5 {
		t.Errorf("next %d end %d, want both 5", res.Next, res.End)
	}

	page, err := e.b.PeekQueue("q", PeekOptions{Max: 2})
	if err != nil || len(page.Messages) != 2 || page.Next != 3 {
		t.Fatalf("first page: %q next %d, %v", peekBodies(page.Messages), page.Next, err)
	}
	page, err = e.b.PeekQueue("q", PeekOptions{From: page.Next, Max: 2})
	if err != nil || !slices.Equal(peekBodies(page.Messages), []string{"later", "m4"}) {
		t.Fatalf("second page: %q, %v", peekBodies(page.Messages), err)
	}

	if after, _ := e.b.QueueStats("q"); after != before {
		t.Errorf("stats changed by a peek:\n%+v\n%+v", before, after)
	}
	got := e.receive("q", 10)
	if !slices.Equal(bodies(got), []string{"m2", "m4"}) {
		t.Fatalf("receive after peek = %q", bodies(got))
	}
	for _, d := range got {
		if d.ReceiveCount != 1 {
			t.Errorf("%s: receive count %d after peeks, want 1", d.Body, d.ReceiveCount)
		}
	}
}

func TestPeekQueueRefusesBadOptions(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q"})
	for _, o := range []PeekOptions{{Max: -1}, {Max: PeekMax + 1}, {From: -1}} {
		var inv *InvalidArgumentError
		if _, err := e.b.PeekQueue("q", o); !errors.As(err, &inv) {
			t.Errorf("%+v: %v, want invalid argument", o, err)
		}
	}
	if _, err := e.b.PeekQueue("nosuch", PeekOptions{}); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("missing queue: %v", err)
	}
}

// A preview counts what the same redrive then moves, per destination,
// with the filter and the limit, and leaves the dead-letter queue as it was.
func TestPreviewRedriveIsWhatTheRedriveMoves(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "a", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.createQueue(QueueSettings{Name: "b", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.deadLetterAll("a", "a1", "a2")
	e.deadLetterAll("b", "b1")
	before, _ := e.b.QueueStats("dlq")

	all, err := e.b.PreviewRedrive(RedriveRequest{Source: "dlq"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if all.Count != 3 || all.Examined != 3 || !all.Complete || len(all.Sample) != 2 ||
		!slices.Equal(all.Destinations, []RedriveDestination{{"a", 2}, {"b", 1}}) {
		t.Fatalf("preview = %+v", all)
	}
	if dl := all.Sample[0].Message.DeadLetter; dl == nil || dl.SourceQueue != "a" {
		t.Errorf("sample without its dead-letter origin: %+v", all.Sample[0].Message)
	}
	req := RedriveRequest{Source: "dlq", Match: &RedriveMatch{SourceQueue: "a"}, Limit: 1}
	one, err := e.b.PreviewRedrive(req, 10)
	if err != nil || one.Count != 1 || !slices.Equal(peekBodies(one.Sample), []string{"a1"}) {
		t.Fatalf("filtered, limited preview = %+v, %v", one, err)
	}
	if after, _ := e.b.QueueStats("dlq"); after != before {
		t.Errorf("dead-letter queue changed by a preview:\n%+v\n%+v", before, after)
	}
	task, err := e.b.StartRedrive(req)
	if err != nil {
		t.Fatal(err)
	}
	done, err := e.b.WaitRedrive(context.Background(), task.ID)
	if err != nil || done.Moved != one.Count {
		t.Fatalf("redrive moved %d (%v), the preview said %d", done.Moved, err, one.Count)
	}
	// A dead letter in flight is not moved by a redrive started now (it
	// ends when nothing is visible): the preview counts it apart.
	if got := e.receive("dlq", 1); len(got) != 1 {
		t.Fatalf("receive from dlq: %q", bodies(got))
	}
	rest, err := e.b.PreviewRedrive(RedriveRequest{Source: "dlq"}, 10)
	if err != nil || rest.Count != 1 || rest.Waiting != 1 || len(rest.Sample) != 1 {
		t.Fatalf("preview with one in flight = %+v, %v", rest, err)
	}
	task, err = e.b.StartRedrive(RedriveRequest{Source: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	if done, err = e.b.WaitRedrive(context.Background(), task.ID); err != nil || done.Moved != rest.Count {
		t.Fatalf("redrive moved %d (%v), the preview said %d", done.Moved, err, rest.Count)
	}
	if _, err := e.b.PreviewRedrive(RedriveRequest{Source: "dlq", Destination: "nosuch"}, 1); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("missing destination: %v", err)
	}
}

// BenchmarkPeekQueue: one console page of a queue (20 messages of 1 KiB)
// whose first half of 10,000 messages was received (in flight), in memory.
func BenchmarkPeekQueue(b *testing.B) {
	br, err := Open(Options{Dir: "/data", FS: vfs.NewMem(), Logger: quietLogger(),
		Sync: storage.SyncPolicy{Mode: storage.SyncNever}, HeadroomBytes: -1, PreallocateBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if _, err := br.CreateQueue(QueueSettings{Name: "q"}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for range 100 {
		in := make([]SendInput, 100)
		for i := range in {
			in[i] = SendInput{Body: body}
		}
		if _, err := br.Send(context.Background(), "q", in); err != nil {
			b.Fatal(err)
		}
	}
	for range 50 {
		if _, err := br.Receive(context.Background(), "q", ReceiveOptions{Max: 100}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := br.PeekQueue("q", PeekOptions{From: 5000, Max: 20})
		if err != nil || len(res.Messages) != 20 {
			b.Fatalf("%d messages, %v", len(res.Messages), err)
		}
	}
}
