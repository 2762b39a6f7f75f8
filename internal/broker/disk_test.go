package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// A full disk is an answer: the write that finds it full fails with
// ErrStorageFull (a message naming no file), the broker reports itself
// unhealthy, refuses further sends, produces and creates at once, and
// keeps acks, purges and deletes working in the headroom it released; a
// create that failed leaves nothing behind; once space is freed,
// maintenance writes the headroom back and sends work again.
func TestFullDiskIsAnAnswer(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	e := newEnv(t, efs)
	e.createQueue(QueueSettings{Name: "q"})
	e.createTopic("t", 1)
	e.send("q", "a", "b", "c")
	ds := e.receive("q", 3)

	// A create that runs into the full disk leaves no directory.
	queuesBefore, _ := efs.List("/data/queues")
	efs.SetSpace(100)
	if _, err := e.b.CreateQueue(QueueSettings{Name: "late"}); !errors.Is(err, ErrStorageFull) {
		t.Fatalf("create on a full disk: %v, want ErrStorageFull", err)
	}
	if after, _ := efs.List("/data/queues"); len(after) != len(queuesBefore) {
		t.Fatalf("a failed create left %v (before: %v)", after, queuesBefore)
	}
	if err := e.b.Health(); !errors.Is(err, ErrStorageFull) {
		t.Fatalf("health on a full disk: %v", err)
	}

	// Writes that add data are refused at once, with no file named.
	_, err := e.b.Send(context.Background(), "q", []SendInput{{Body: []byte("d")}})
	if !errors.Is(err, ErrStorageFull) || strings.Contains(err.Error(), "/data") {
		t.Fatalf("send on a full disk: %v, want ErrStorageFull without a path", err)
	}
	if _, err := e.b.Produce(context.Background(), "t", []ProduceRecord{kv("", "x")}, ProduceOptions{}); !errors.Is(err, ErrStorageFull) {
		t.Fatalf("produce on a full disk: %v", err)
	}
	if _, err := e.b.CreateTopic(TopicSettings{Name: "t2"}); !errors.Is(err, ErrStorageFull) {
		t.Fatalf("create topic on a full disk: %v", err)
	}

	// Writes that finish work or free space go on, in the headroom.
	if err := e.b.Ack(context.Background(), "q", ds[0].Receipt); err != nil {
		t.Fatalf("ack on a full disk: %v", err)
	}
	if err := e.b.Nack(context.Background(), "q", ds[1].Receipt, 0, ""); err != nil {
		t.Fatalf("nack on a full disk: %v", err)
	}
	if err := e.b.PurgeQueue(context.Background(), "q"); err != nil {
		t.Fatalf("purge on a full disk: %v", err)
	}
	// Still full: the journal records used some of the headroom, so
	// maintenance cannot write it back whole.
	e.b.Maintain()
	if e.b.Health() == nil {
		t.Fatal("healthy again before any space was freed")
	}
	// The operator frees space, through the API or by hand: maintenance
	// leaves the full state.
	if err := e.b.DeleteTopic("t"); err != nil {
		t.Fatalf("delete topic on a full disk: %v", err)
	}
	efs.SetSpace(vfs.Unlimited)
	e.clock.Advance(time.Second)
	e.b.Maintain()
	if err := e.b.Health(); err != nil {
		t.Fatalf("health once space was freed: %v", err)
	}
	e.send("q", "e")
	if got := bodies(e.receive("q", 10)); len(got) != 1 || got[0] != "e" {
		t.Fatalf("after the disk had room again: %v, want [e]", got)
	}
}

// An I/O error is reported as ErrStorageFailed, makes the broker unhealthy,
// and does not refuse later writes by itself.
func TestDiskIOErrorIsReported(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	e := newEnv(t, efs)
	e.createQueue(QueueSettings{Name: "q"})
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Count: 1, Match: func(_ vfs.Op, p string) bool {
		return strings.Contains(p, "/queues/")
	}})
	_, err := e.b.Send(context.Background(), "q", []SendInput{{Body: []byte("a")}})
	if !errors.Is(err, ErrStorageFailed) || strings.Contains(err.Error(), "/data") {
		t.Fatalf("send through an I/O error: %v, want ErrStorageFailed without a path", err)
	}
	if !errors.Is(e.b.Health(), ErrStorageFailed) {
		t.Fatalf("health: %v", e.b.Health())
	}
	e.send("q", "b")
	e.b.Maintain()
	if err := e.b.Health(); err != nil {
		t.Fatalf("health after a write worked again: %v", err)
	}
}

// A queue that cannot be opened at start (its journal unreadable) does not
// keep the broker or any other queue from starting: it is listed, refused
// with ErrQueueUnavailable, and DeleteQueue removes it.
func TestUnopenableQueueIsIsolated(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	e := newEnv(t, efs)
	e.createQueue(QueueSettings{Name: "good"})
	e.createQueue(QueueSettings{Name: "bad"})
	e.send("good", "a")
	e.send("bad", "b")
	e.receive("bad", 1) // a journal record to replay at the next start
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	efs.Inject(vfs.Fault{Op: vfs.OpReadAt, Match: func(_ vfs.Op, p string) bool {
		return strings.Contains(p, "-bad/journal/")
	}})
	e.open()
	efs.ClearFaults()
	if got := e.b.ListQueues(""); len(got) != 2 {
		t.Fatalf("listed %v, want both queues", got)
	}
	if got := bodies(e.receive("good", 1)); len(got) != 1 || got[0] != "a" {
		t.Fatalf("the good queue: %v", got)
	}
	if _, err := e.b.Receive(context.Background(), "bad", ReceiveOptions{}); !errors.Is(err, ErrQueueUnavailable) {
		t.Fatalf("receive from the unopenable queue: %v, want ErrQueueUnavailable", err)
	}
	if _, err := e.b.CreateQueue(QueueSettings{Name: "bad"}); !errors.Is(err, ErrQueueUnavailable) {
		t.Fatalf("create over it: %v", err)
	}
	if err := e.b.DeleteQueue("bad"); err != nil {
		t.Fatalf("delete it: %v", err)
	}
	e.restart()
	if got := e.b.ListQueues(""); len(got) != 1 || got[0] != "good" {
		t.Fatalf("after the delete and a restart: %v", got)
	}
}

// A queue whose dead-letter copy failed holds in memory what the disk
// does not (the message finished as dead-lettered): no snapshot may be
// taken of that, by maintenance or at close, or the message would be gone
// after a restart. It comes back, with its receive count.
func TestNoSnapshotOfABrokenQueue(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	e := newEnv(t, efs) // a snapshot every 50 events; maintenance folds 5
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "q", DeadLetterQueue: "dlq", MaxReceives: 1})
	for range 6 { // events enough for maintenance to snapshot
		e.send("q", "x")
		for _, d := range e.receive("q", 1) {
			if err := e.b.Ack(context.Background(), "q", d.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.send("q", "m")
	ds := e.receive("q", 1)
	if err := e.b.Nack(context.Background(), "q", ds[0].Receipt, 0, ""); err != nil {
		t.Fatal(err)
	}
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Match: func(_ vfs.Op, p string) bool { return strings.Contains(p, "-dlq/log/") }})
	if _, err := e.b.Receive(context.Background(), "q", ReceiveOptions{Max: 1}); err == nil {
		t.Fatal("the dead-letter copy failed, yet the receive succeeded")
	}
	e.b.Maintain()
	efs.ClearFaults()
	e.restart()
	if st, _ := e.b.QueueStats("q"); st.Depth() != 1 {
		t.Fatalf("after a restart the queue holds %d, want m back", st.Depth())
	}
}
