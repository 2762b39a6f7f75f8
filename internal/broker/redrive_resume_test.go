package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// redriveStepper replaces the rate limit's wait of redrive tasks: each wait
// announces itself, blocks until the test lets one move through, and then
// advances the fake clock by the wait, so the test decides exactly how many
// messages move, without sleeping.
type redriveStepper struct {
	t       *testing.T
	arrived chan struct{}
	release chan struct{}
	moves   int // let through by move, for failure messages
}

func newRedriveStepper(t *testing.T, clock *fakeClock) *redriveStepper {
	s := &redriveStepper{t: t, arrived: make(chan struct{}), release: make(chan struct{})}
	wait := func(ctx context.Context, d time.Duration) error {
		select {
		case s.arrived <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-s.release:
			clock.Advance(d)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	redriveSleepHook.Store(&wait)
	t.Cleanup(func() { redriveSleepHook.Store(nil) })
	return s
}

// parked waits until a task holds a message and waits for its turn to move
// it (its progress, with that message's receipt, is saved by then).
func (s *redriveStepper) parked() {
	s.t.Helper()
	select {
	case <-s.arrived:
	case <-time.After(20 * time.Second): // a hang guard, not a timing assertion
		s.t.Fatalf("no redrive task reached its rate limit (%d moves let through)", s.moves)
	}
}

// move lets n messages move, one at a time, each once a task is parked.
func (s *redriveStepper) move(n int) {
	s.t.Helper()
	for range n {
		s.parked()
		s.release <- struct{}{}
		s.moves++
	}
}

// crashNow is a power cut at this instant: the broker is reopened on what was
// synced so far. The dead broker is then closed (on the old FS, which the
// new one no longer sees), so its tasks stop waiting on the stepper.
func (e *env) crashNow(mem *vfs.MemFS) {
	e.t.Helper()
	e.crashOnto(mem.CrashClone())
}

func (e *env) crashOnto(clone *vfs.MemFS) {
	e.t.Helper()
	e.b.Close()
	e.fs = clone
	e.open()
}

func (e *env) waitRedrive(id string) RedriveTask {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancel()
	task, err := e.b.WaitRedrive(ctx, id)
	if err != nil {
		e.t.Fatalf("wait for redrive %s: %v", id, err)
	}
	return task
}

// drain receives (and acks) everything visible in queue and counts bodies.
func (e *env) drain(queue string) map[string]int {
	e.t.Helper()
	got := map[string]int{}
	for _, d := range e.receive(queue, 1000) {
		got[string(d.Body)]++
		if err := e.b.Ack(context.Background(), queue, d.Receipt); err != nil {
			e.t.Fatal(err)
		}
	}
	return got
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// TestRedriveResumesAfterRestart: a rate-limited task stopped by a power
// cut or a clean restart after k moves comes back RUNNING with its moved
// count, hands back the message it held, and completes: every message ends
// in the target, none is left in the dead-letter queue.
func TestRedriveResumesAfterRestart(t *testing.T) {
	const n = 10
	for _, tc := range []struct {
		name  string
		moved int // moves before the stop; the task then holds message moved+1
		stop  func(e *env, mem *vfs.MemFS)
	}{
		{"power cut before the first move", 0, (*env).crashNow},
		{"power cut half way", 4, (*env).crashNow},
		{"power cut before the last move", n - 1, (*env).crashNow},
		{"clean restart half way", 4, func(e *env, _ *vfs.MemFS) { e.restart() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			e := newEnv(t, mem)
			steps := newRedriveStepper(t, e.clock)
			msgs := e.deadLetteredToTarget(n)

			started, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", RatePerSecond: 2})
			if err != nil {
				t.Fatal(err)
			}
			steps.move(tc.moved)
			steps.parked() // holding the next message, saved, waiting for the rate limit

			tc.stop(e, mem)
			got, err := e.b.GetRedrive(started.ID)
			if err != nil {
				t.Fatalf("task forgotten by the restart: %v", err)
			}
			if got.Status != RedriveRunning || got.Moved != int64(tc.moved) || got.ToMove != n || !got.StartedAt.Equal(started.StartedAt) {
				t.Fatalf("after the restart: %+v; want RUNNING with %d moved of %d", got, tc.moved, n)
			}
			steps.move(n - tc.moved)
			done := e.waitRedrive(started.ID)
			if done.Status != RedriveCompleted || done.Moved != n {
				t.Fatalf("resumed task = %+v; want COMPLETED with %d moved", done, n)
			}
			inTarget := e.drain("target")
			for _, m := range msgs {
				if inTarget[m] != 1 {
					t.Errorf("%s is in the target %d times, want once: %v", m, inTarget[m], inTarget)
				}
			}
			e.clock.Advance(time.Hour) // anything the redrive still hid would reappear
			if left := e.drain("dlq"); len(left) != 0 {
				t.Errorf("left in the dead-letter queue: %v", left)
			}
		})
	}
}

// TestRedriveResumeAfterCrashBetweenSendAndAck: the power cut strikes after
// a message's copy reached the target and before the dead-letter queue's
// ack was written. The resumed task hands it back and moves it again: that
// one message is in the target twice, every other once, none lost.
func TestRedriveResumeAfterCrashBetweenSendAndAck(t *testing.T) {
	const n, cutAt = 6, 3 // the cut strikes while message m3 (the fourth) is moved
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	e := newEnv(t, efs)
	steps := newRedriveStepper(t, e.clock)
	msgs := e.deadLetteredToTarget(n)
	started, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", RatePerSecond: 5})
	if err != nil {
		t.Fatal(err)
	}
	steps.move(cutAt)
	steps.parked() // m3 received and saved as held; its receive is durable

	// The next write to the dead-letter queue's journal is m3's ack, made
	// after its copy is durable in the target: cut the power just before it.
	var mu sync.Mutex
	var clone *vfs.MemFS
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Match: func(_ vfs.Op, path string) bool {
		mu.Lock()
		defer mu.Unlock()
		if clone == nil && strings.Contains(path, "-dlq/journal/") {
			clone = mem.CrashClone()
		}
		return false // never fails; it only watches
	}})
	steps.release <- struct{}{}
	steps.parked() // the dead broker moved m3 and holds m4
	mu.Lock()
	cut := clone
	mu.Unlock()
	if cut == nil {
		t.Fatal("the ack of m3 never reached the dead-letter journal")
	}
	e.crashOnto(cut)

	if got, _ := e.b.GetRedrive(started.ID); got.Status != RedriveRunning || got.Moved != cutAt {
		t.Fatalf("after the cut: %+v; want RUNNING with %d moved", got, cutAt)
	}
	steps.move(n - cutAt)
	if done := e.waitRedrive(started.ID); done.Status != RedriveCompleted || done.Moved != n {
		t.Fatalf("resumed task = %+v; want COMPLETED with %d moved", done, n)
	}
	inTarget := e.drain("target")
	for i, m := range msgs {
		want := 1
		if i == cutAt {
			want = 2 // its first copy survived the cut, its ack did not
		}
		if inTarget[m] != want {
			t.Errorf("%s is in the target %d times, want %d: %v", m, inTarget[m], want, inTarget)
		}
	}
	e.clock.Advance(time.Hour)
	if left := e.drain("dlq"); len(left) != 0 {
		t.Errorf("left in the dead-letter queue: %v", left)
	}
}

// TestRedriveCancelSurvivesRestart: a cancelled task stays cancelled, with
// its counts, after a power cut; it is not resumed, and the queue is free
// for a new task.
func TestRedriveCancelSurvivesRestart(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem)
	steps := newRedriveStepper(t, e.clock)
	e.deadLetteredToTarget(8)
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", RatePerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	steps.move(2)
	steps.parked()
	cancelled, err := e.b.CancelRedrive(task.ID)
	if err != nil || cancelled.Status != RedriveCancelled || cancelled.Moved != 2 {
		t.Fatalf("cancel = %+v, %v", cancelled, err)
	}

	e.crashNow(mem)
	got, err := e.b.GetRedrive(task.ID)
	if err != nil || got.Status != RedriveCancelled || got.Moved != 2 || !got.FinishedAt.Equal(cancelled.FinishedAt) {
		t.Fatalf("after the restart: %+v, %v; want it CANCELLED as before: %+v", got, err, cancelled)
	}
	if n := len(e.drain("target")); n != 2 {
		t.Fatalf("target holds %d messages, want the 2 moved before the cancel", n)
	}
	if n := len(e.drain("dlq")); n != 6 {
		t.Fatalf("dead-letter queue holds %d messages, want the 6 not moved (the held one handed back)", n)
	}
	if _, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target"}); err != nil {
		t.Fatalf("a new task after the cancelled one: %v", err)
	}
}

// TestRedriveResumeKeepsItsFilter: a Match filter is saved with the task
// and applies after the restart; a Filter function cannot be saved, so
// such a task ends FAILED at the restart and its messages stay put.
func TestRedriveResumeKeepsItsFilter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req      RedriveRequest
		status   string
		inTarget []string // sorted
	}{
		{"match resumes", RedriveRequest{Match: &RedriveMatch{SourceQueue: "a"}}, RedriveCompleted, []string{"a0", "a1", "a2"}},
		{"function fails", RedriveRequest{Filter: func(m *Message) bool { return m.DeadLetter.SourceQueue == "a" }}, RedriveFailed, []string{"a0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			e := newEnv(t, mem)
			steps := newRedriveStepper(t, e.clock)
			e.createQueue(QueueSettings{Name: "dlq"})
			e.createQueue(QueueSettings{Name: "a", MaxReceives: 1, DeadLetterQueue: "dlq"})
			e.createQueue(QueueSettings{Name: "b", MaxReceives: 1, DeadLetterQueue: "dlq"})
			e.createQueue(QueueSettings{Name: "target"})
			e.deadLetterAll("a", numbered("a", 3)...)
			e.deadLetterAll("b", numbered("b", 3)...)
			req := tc.req
			req.Source, req.Destination, req.RatePerSecond = "dlq", "target", 1
			task, err := e.b.StartRedrive(req)
			if err != nil {
				t.Fatal(err)
			}
			steps.move(1)
			steps.parked() // holds a1

			e.crashNow(mem)
			if tc.status == RedriveCompleted {
				steps.move(2)
			}
			done := e.waitRedrive(task.ID)
			if done.Status != tc.status {
				t.Fatalf("task = %+v; want %s", done, tc.status)
			}
			var got []string
			for body := range e.drain("target") {
				got = append(got, body)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.inTarget) {
				t.Fatalf("target = %q, want %q", got, tc.inTarget)
			}
			e.clock.Advance(time.Hour)
			if left := e.drain("dlq"); len(left)+len(got) != 6 {
				t.Fatalf("dead-letter queue keeps %v; with the target's %q some are lost", left, got)
			}
		})
	}
}

// TestRedriveFinishedTasksAfterRestart: finished tasks are listed again
// after a restart, still bounded to keepFinishedRedrives, and the files of
// forgotten ones are deleted.
func TestRedriveFinishedTasksAfterRestart(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "dlq"})
	var last RedriveTask
	for range keepFinishedRedrives + 3 {
		task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq"})
		if err != nil {
			t.Fatal(err)
		}
		last = e.waitRedrive(task.ID)
		e.clock.Advance(time.Second) // distinct start and finish times
	}
	e.restart()
	if n := len(e.b.ListRedrives("dlq")); n != keepFinishedRedrives {
		t.Fatalf("%d tasks listed after the restart, want %d", n, keepFinishedRedrives)
	}
	if got, err := e.b.GetRedrive(last.ID); err != nil || got.Status != RedriveCompleted ||
		!got.StartedAt.Equal(last.StartedAt) || !got.FinishedAt.Equal(last.FinishedAt) {
		t.Fatalf("newest task after the restart = %+v, %v; want %+v", got, err, last)
	}
	files, err := e.fs.List("/data/" + redriveDirName)
	if err != nil || len(files) != keepFinishedRedrives {
		t.Fatalf("%d task files (%v), want %d", len(files), err, keepFinishedRedrives)
	}
}
