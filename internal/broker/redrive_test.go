package broker

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// deadLetterAll sends bodies to src and lets each one exhaust its single
// receive, so all of them land in src's dead-letter queue.
func (e *env) deadLetterAll(src string, msgs ...string) {
	e.t.Helper()
	e.send(src, msgs...)
	e.receive(src, len(msgs))
	e.clock.Advance(time.Hour)
	if got := e.receive(src, len(msgs)); len(got) != 0 {
		e.t.Fatalf("messages were delivered again instead of dead-lettered: %q", bodies(got))
	}
}

// deadLetteredToTarget makes the queues most redrive tests use: dlq, src
// (whose messages go to dlq after one receive) and target, and dead-letters
// n messages m0, m1, … from src. It returns their bodies.
func (e *env) deadLetteredToTarget(n int) []string {
	e.t.Helper()
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.createQueue(QueueSettings{Name: "target"})
	msgs := numbered("m", n)
	e.deadLetterAll("src", msgs...)
	return msgs
}

func TestRedriveBackToSource(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "a", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.createQueue(QueueSettings{Name: "b", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.deadLetterAll("a", "a1", "a2")
	e.deadLetterAll("b", "b1")
	if got := e.b.DeadLetterSources("dlq"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("sources = %q", got)
	}
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	if task.ToMove != 3 {
		t.Fatalf("to move = %d, want 3", task.ToMove)
	}
	done, err := e.b.WaitRedrive(context.Background(), task.ID)
	if err != nil || done.Status != RedriveCompleted || done.Moved != 3 {
		t.Fatalf("task = %+v, %v", done, err)
	}
	got := bodies(e.receive("a", 10))
	sort.Strings(got)
	if !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("a got %q", got)
	}
	if got := bodies(e.receive("b", 10)); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("b got %q", got)
	}
	if st, _ := e.b.QueueStats("dlq"); st.Depth() != 0 {
		t.Fatalf("dlq not empty: %+v", st)
	}
}

func TestRedriveFilterLimitAndDestination(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.createQueue(QueueSettings{Name: "other"})
	e.deadLetterAll("src", "keep-1", "move-1", "move-2", "move-3")
	task, err := e.b.StartRedrive(RedriveRequest{
		Source: "dlq", Destination: "other", Limit: 2,
		Filter: func(m *Message) bool { return string(m.Body[:4]) == "move" },
	})
	if err != nil {
		t.Fatal(err)
	}
	done, _ := e.b.WaitRedrive(context.Background(), task.ID)
	if done.Status != RedriveCompleted || done.Moved != 2 {
		t.Fatalf("task = %+v", done)
	}
	if got := bodies(e.receive("other", 10)); len(got) != 2 {
		t.Fatalf("other got %q", got)
	}
	e.clock.Advance(time.Hour) // skipped messages' hiding runs out
	if st, _ := e.b.QueueStats("dlq"); st.Depth() != 2 {
		t.Fatalf("dlq should keep keep-1 and one move: %+v", st)
	}
}

func TestRedriveCancel(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.deadLetterAll("src", "1", "2", "3", "4", "5")
	// One move a second: the task is still running when cancelled.
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", RatePerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.StartRedrive(RedriveRequest{Source: "dlq"}); err == nil {
		t.Fatal("a second task on the same queue started")
	}
	got, err := e.b.CancelRedrive(task.ID)
	if err != nil || got.Status != RedriveCancelled {
		t.Fatalf("cancel = %+v, %v", got, err)
	}
	e.clock.Advance(time.Hour)
	st, _ := e.b.QueueStats("dlq")
	moved, _ := e.b.QueueStats("src")
	if st.Depth()+moved.Depth() != 5 {
		t.Fatalf("messages lost or duplicated by cancel: dlq %d + src %d", st.Depth(), moved.Depth())
	}
}

// TestRedriveCrashBetweenSendAndAck: the copy reached the source queue but
// the dead-letter queue's ack never became durable, and then the machine
// lost power. The message must be in both queues afterwards (at most
// duplicated), never in neither.
func TestRedriveCrashBetweenSendAndAck(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	e := newEnv(t, efs)
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.deadLetterAll("src", "m1")

	// The redrive's receive is the dead-letter journal's first write from
	// here on; its ack is the second, and that one fails.
	writes := 0
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Match: func(_ vfs.Op, path string) bool {
		if !strings.Contains(path, "-dlq/journal/") {
			return false
		}
		writes++
		return writes >= 2
	}})
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	done, _ := e.b.WaitRedrive(context.Background(), task.ID)
	if done.Status != RedriveFailed {
		t.Fatalf("task = %+v, want it failed by the ack's write error", done)
	}

	// Power cut: reopen on what was synced, with the fault gone.
	e.fs = mem.CrashClone()
	old := e.b
	e.open()
	go old.Close()
	e.clock.Advance(time.Hour) // the redrive's hiding of m1 in the DLQ runs out

	if got := bodies(e.receive("src", 10)); !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("source queue after the crash: %q, want the redriven m1", got)
	}
	if got := bodies(e.receive("dlq", 10)); !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("dead-letter queue after the crash: %q, want m1 still there (its ack was lost)", got)
	}
}

// TestRedriveTasksAreBounded: finished tasks are forgotten beyond
// keepFinishedRedrives, so the task list does not grow forever.
func TestRedriveTasksAreBounded(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "dlq"})
	for range keepFinishedRedrives + 5 {
		task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.b.WaitRedrive(context.Background(), task.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.b.ListRedrives("")); n > keepFinishedRedrives+1 {
		t.Fatalf("%d tasks remembered, want at most %d", n, keepFinishedRedrives+1)
	}
}
