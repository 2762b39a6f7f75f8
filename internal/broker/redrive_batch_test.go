package broker

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// The redrive tests of batches: a step moves up to redriveBatchMax messages
// (fewer at a rate limit), saved once, sent per destination, acked together.

// runOf is the in-memory run of a task, to look at what it holds.
func (e *env) runOf(id string) *redriveRun {
	e.t.Helper()
	e.b.redrive.mu.Lock()
	defer e.b.redrive.mu.Unlock()
	r := e.b.redrive.tasks[id]
	if r == nil {
		e.t.Fatalf("no run for task %s", id)
	}
	return r
}

func (r *redriveRun) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.holding)
}

// resumeLog hears the "redrive resumed" lines of Open, which report the
// moved count once the held batch has been settled (stale receipts counted).
type resumeLog struct {
	mu    sync.Mutex
	moved []int64
}

func (h *resumeLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *resumeLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *resumeLog) WithGroup(string) slog.Handler            { return h }
func (h *resumeLog) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "redrive resumed" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "moved" {
			h.mu.Lock()
			h.moved = append(h.moved, a.Value.Int64())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// TestRedriveBatchCrashAtEverySync runs an unlimited-rate redrive of 250
// messages (batches of 100, 100 and 50; the second holds messages of both
// source queues, so it is sent in two sends) and cuts the power before every
// sync it makes, one cut per reopened copy of the disk. After each cut the
// resumed task completes and: every message is in its source queue at least
// once or still in the dead-letter queue (none lost), at most one batch is
// duplicated, and the moved count is exactly the number of distinct messages
// moved (a stale receipt at resume counts its message as moved, once).
func TestRedriveBatchCrashAtEverySync(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	e := newEnv(t, efs)
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "a", MaxReceives: 1, DeadLetterQueue: "dlq"})
	e.createQueue(QueueSettings{Name: "b", MaxReceives: 1, DeadLetterQueue: "dlq"})
	as, bs := numbered("a", 130), numbered("b", 120)
	e.deadLetterAll("a", as...)
	e.deadLetterAll("b", bs...)
	all := append(slices.Clone(as), bs...)

	var mu sync.Mutex
	var cuts []*vfs.MemFS
	efs.Inject(vfs.Fault{Match: func(op vfs.Op, _ string) bool {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			mu.Lock()
			cuts = append(cuts, mem.CrashClone())
			mu.Unlock()
		}
		return false // never fails; it only takes copies
	}})
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	if done := e.waitRedrive(task.ID); done.Status != RedriveCompleted || done.Moved != int64(len(all)) {
		t.Fatalf("uncut task = %+v", done)
	}
	efs.ClearFaults()
	mu.Lock()
	cuts = append(cuts, mem.CrashClone())
	mu.Unlock()
	if len(cuts) < 15 {
		t.Fatalf("only %d syncs seen: is the redrive still batching and syncing?", len(cuts))
	}

	var withDuplicates, withStale, betweenSends int
	for i, cut := range cuts {
		saved, ok := savedRedrive(t, cut, task.ID)
		log := &resumeLog{}
		c := newClock()
		c.now = e.clock.Now()
		after := &env{t: t, fs: cut, clock: c}
		b, err := Open(Options{Dir: "/data", FS: cut, Now: c.Now, Logger: slog.New(log), SnapshotEvery: 50, HeadroomBytes: testHeadroom})
		if err != nil {
			t.Fatalf("cut %d: open: %v", i, err)
		}
		after.b = b
		if ok {
			if done := after.waitRedrive(task.ID); done.Status != RedriveCompleted {
				t.Fatalf("cut %d: resumed task = %+v", i, done)
			}
		}
		c.Advance(time.Hour) // what the redrive hid in the DLQ reappears
		inA, inB, inDLQ := after.drain("a"), after.drain("b"), after.drain("dlq")
		got, _ := after.b.GetRedrive(task.ID)
		if err := after.b.Close(); err != nil {
			t.Fatal(err)
		}
		if !ok {
			// Cut before the task's first save: it never moved anything.
			if len(inA)+len(inB) != 0 || len(inDLQ) != len(all) {
				t.Fatalf("cut %d, before the task was saved: a %v, b %v, dlq holds %d", i, inA, inB, len(inDLQ))
			}
			continue
		}
		extra, distinct := 0, 0
		for _, m := range all {
			home := inA
			if m[0] == 'b' {
				home = inB
			}
			if home[m]+inDLQ[m] == 0 {
				t.Errorf("cut %d: %s is lost", i, m)
			}
			if home[m] > 0 {
				distinct++
				extra += home[m] - 1
			}
			if inDLQ[m] > 1 || home[m] > 2 {
				t.Errorf("cut %d: %s is %d times in its queue, %d in the DLQ", i, m, home[m], inDLQ[m])
			}
		}
		if extra > redriveBatchMax {
			t.Errorf("cut %d: %d duplicates, more than one batch", i, extra)
		}
		if got.Moved != int64(distinct) {
			t.Errorf("cut %d: task counts %d moved, %d distinct messages were", i, got.Moved, distinct)
		}
		if extra > 0 {
			withDuplicates++
			// The second batch (a100-a129, then b0-b69) cut after its
			// send to a and before its send to b.
			if inA["a100"] == 2 && inB["b0"] == 1 {
				betweenSends++
			}
		}
		if len(log.moved) == 1 && log.moved[0] > saved.Task.Moved {
			withStale++
		}
	}
	t.Logf("%d cuts: %d dup, %d between sends, %d stale", len(cuts), withDuplicates, betweenSends, withStale)
	// The cuts fell where they matter.
	if withDuplicates == 0 || betweenSends == 0 || withStale == 0 {
		t.Fatalf("of %d cuts: %d between sends and ack, %d between two sends of a batch, %d after an ack before the save; want each",
			len(cuts), withDuplicates, betweenSends, withStale)
	}
}

// savedRedrive reads a task's file as a power cut left it.
func savedRedrive(t *testing.T, fsys vfs.FS, id string) (redriveRecord, bool) {
	t.Helper()
	buf, err := vfs.ReadFile(fsys, filepath.Join("/data", redriveDirName, id+".json"))
	if err != nil {
		return redriveRecord{}, false
	}
	var rec redriveRecord
	if err := json.Unmarshal(buf, &rec); err != nil {
		t.Fatalf("task file: %v", err)
	}
	return rec, true
}

// TestRedriveBatchResumeMidBatch: at 50 messages a second a step moves 5. A
// power cut while the third batch waits for the rate limit (saved with its
// five receipts) hands those five back at the restart; the resumed task
// moves everything exactly once.
func TestRedriveBatchResumeMidBatch(t *testing.T) {
	const n, rate = 23, 50
	step := redriveStepSize(rate)
	if step != 5 {
		t.Fatalf("step at %d/s = %d, want 5", rate, step)
	}
	mem := vfs.NewMem()
	e := newEnv(t, mem)
	steps := newRedriveStepper(t, e.clock)
	msgs := e.deadLetteredToTarget(n)
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", RatePerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	steps.move(2)
	steps.parked()
	if held := e.runOf(task.ID).held(); held != step {
		t.Fatalf("the task holds %d messages, want a batch of %d", held, step)
	}
	if saved, _ := savedRedrive(t, mem, task.ID); len(saved.Holding) != step || saved.Task.Moved != int64(2*step) {
		t.Fatalf("saved: %d moved, holding %d; want %d and %d", saved.Task.Moved, len(saved.Holding), 2*step, step)
	}

	e.crashNow(mem)
	if got, _ := e.b.GetRedrive(task.ID); got.Status != RedriveRunning || got.Moved != int64(2*step) {
		t.Fatalf("after the cut: %+v; want RUNNING with %d moved", got, 2*step)
	}
	steps.move(3) // 13 left: 5, 5, 3
	if done := e.waitRedrive(task.ID); done.Status != RedriveCompleted || done.Moved != n {
		t.Fatalf("resumed task = %+v; want COMPLETED with %d moved", done, n)
	}
	inTarget := e.drain("target")
	for _, m := range msgs {
		if inTarget[m] != 1 {
			t.Errorf("%s is in the target %d times, want once", m, inTarget[m])
		}
	}
	e.clock.Advance(time.Hour)
	if left := e.drain("dlq"); len(left) != 0 {
		t.Errorf("left in the dead-letter queue: %v", left)
	}
}

// TestRedriveReadsVersion1Files: a task file written before batches (one
// held receipt) still resumes, handing that message back.
func TestRedriveReadsVersion1Files(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem)
	steps := newRedriveStepper(t, e.clock)
	e.deadLetteredToTarget(3)
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", RatePerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	steps.move(1)
	steps.parked()
	clone := mem.CrashClone()
	rec, ok := savedRedrive(t, clone, task.ID)
	if !ok || len(rec.Holding) != 1 {
		t.Fatalf("saved = %+v", rec)
	}
	rec.Version, rec.HoldingOne, rec.Holding = 1, rec.Holding[0], nil
	buf, _ := json.Marshal(rec)
	if err := vfs.WriteFileAtomic(clone, filepath.Join("/data", redriveDirName), task.ID+".json", buf); err != nil {
		t.Fatal(err)
	}
	e.crashOnto(clone)
	steps.move(2)
	if done := e.waitRedrive(task.ID); done.Status != RedriveCompleted || done.Moved != 3 {
		t.Fatalf("resumed task = %+v", done)
	}
	if got := e.drain("target"); len(got) != 3 {
		t.Fatalf("target = %v", got)
	}
}

// TestRedriveBatchFilterRejectsMost: a filter that passes one message in
// fifty neither stalls the task nor makes it loop over the rejected ones,
// and moves exactly what one-at-a-time did: with a limit, the examining
// stops at the message that reaches it, and the skipped count says so.
func TestRedriveBatchFilterRejectsMost(t *testing.T) {
	const n = 300
	every50 := func(m *Message) bool {
		i, err := strconv.Atoi(string(m.Body[1:]))
		return err == nil && i%50 == 0
	}
	for _, tc := range []struct {
		name           string
		limit          int64
		moved, skipped int64
		visible        int // in the DLQ at once (never received)
	}{
		{"no limit", 0, 6, n - 6, 0},
		{"limit 4", 4, 4, 147, n - 151}, // the 4th match is m150
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.deadLetteredToTarget(n)
			task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", Limit: tc.limit, Filter: every50})
			if err != nil {
				t.Fatal(err)
			}
			done := e.waitRedrive(task.ID)
			if done.Status != RedriveCompleted || done.Moved != tc.moved || done.Skipped != tc.skipped {
				t.Fatalf("task = %+v; want COMPLETED, %d moved, %d skipped", done, tc.moved, tc.skipped)
			}
			var want []string
			for i := 0; i < int(tc.moved); i++ {
				want = append(want, "m"+strconv.Itoa(50*i))
			}
			var got []string
			for body, k := range e.drain("target") {
				if k != 1 {
					t.Errorf("%s moved %d times", body, k)
				}
				got = append(got, body)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("target = %q, want %q", got, want)
			}
			if left := e.drain("dlq"); len(left) != tc.visible {
				t.Fatalf("%d visible in the DLQ at once, want %d", len(left), tc.visible)
			}
			e.clock.Advance(time.Hour) // the skipped ones reappear
			if left := e.drain("dlq"); len(left) != int(tc.skipped) {
				t.Fatalf("%d reappeared in the DLQ, want the %d skipped", len(left), tc.skipped)
			}
		})
	}
}

// TestRedriveBatchLimitBelowBatch: a limit smaller than a batch receives
// only that many, so the rest of the dead-letter queue stays visible.
func TestRedriveBatchLimitBelowBatch(t *testing.T) {
	const n, limit = 250, 30
	e := newEnv(t, nil)
	msgs := e.deadLetteredToTarget(n)
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	if task.ToMove != limit {
		t.Fatalf("to move = %d", task.ToMove)
	}
	if done := e.waitRedrive(task.ID); done.Status != RedriveCompleted || done.Moved != limit {
		t.Fatalf("task = %+v", done)
	}
	got := e.drain("target")
	for _, m := range msgs[:limit] {
		if got[m] != 1 {
			t.Errorf("%s is in the target %d times, want once", m, got[m])
		}
	}
	if len(got) != limit {
		t.Errorf("target holds %d messages, want %d", len(got), limit)
	}
	if left := e.drain("dlq"); len(left) != n-limit {
		t.Fatalf("%d visible in the DLQ, want %d: the task received more than its limit", len(left), n-limit)
	}
}

// TestRedriveBatchCancel: a cancel while a batch waits for the rate limit
// stops the task at once; that batch goes straight back to the dead-letter
// queue, and the batches moved before stay moved.
func TestRedriveBatchCancel(t *testing.T) {
	const n, rate = 450, 1000 // 100 a step
	e := newEnv(t, nil)
	steps := newRedriveStepper(t, e.clock)
	e.deadLetteredToTarget(n)
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", RatePerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	steps.move(2)
	steps.parked()
	if held := e.runOf(task.ID).held(); held != redriveBatchMax {
		t.Fatalf("holds %d, want a batch of %d", held, redriveBatchMax)
	}
	got, err := e.b.CancelRedrive(task.ID)
	if err != nil || got.Status != RedriveCancelled || got.Moved != 2*redriveBatchMax {
		t.Fatalf("cancel = %+v, %v; want CANCELLED with %d moved", got, err, 2*redriveBatchMax)
	}
	if k := len(e.drain("target")); k != 2*redriveBatchMax {
		t.Fatalf("target holds %d", k)
	}
	// No clock advance: the held batch was handed back, not left hidden.
	if k := len(e.drain("dlq")); k != n-2*redriveBatchMax {
		t.Fatalf("%d visible in the DLQ, want %d", k, n-2*redriveBatchMax)
	}
}

// TestRedriveBatchRateLimit: over a whole run at 50 messages a second, no
// moment has more messages moved than the rate allows since the start, a
// step moves at most a tenth of a second's worth, and the run takes the
// time the rate says.
func TestRedriveBatchRateLimit(t *testing.T) {
	const n, rate = 123, 50
	e := newEnv(t, nil)
	e.deadLetteredToTarget(n)
	start := e.clock.Now()
	var mu sync.Mutex
	var id string
	largest, waits := 0, 0
	wait := func(ctx context.Context, d time.Duration) error {
		e.clock.Advance(d)
		mu.Lock()
		r := e.runOf(id)
		mu.Unlock()
		r.mu.Lock()
		moving, held := r.task.Moved+int64(len(r.holding)), len(r.holding)
		r.mu.Unlock()
		elapsed := e.clock.Now().Sub(start)
		if moving*int64(time.Second) > rate*int64(elapsed) {
			t.Errorf("%d moved by %v: over %d a second", moving, elapsed, rate)
		}
		largest, waits = max(largest, held), waits+1
		return ctx.Err()
	}
	redriveSleepHook.Store(&wait)
	t.Cleanup(func() { redriveSleepHook.Store(nil) })
	mu.Lock() // the first wait looks the task up by id
	task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "target", RatePerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	id = task.ID
	mu.Unlock()
	done := e.waitRedrive(task.ID)
	if done.Status != RedriveCompleted || done.Moved != n {
		t.Fatalf("task = %+v", done)
	}
	if largest != 5 || waits != 25 {
		t.Fatalf("largest step %d, %d steps; want steps of 5 and 25 of them", largest, waits)
	}
	if took, want := e.clock.Now().Sub(start), time.Duration(n)*time.Second/rate; took < want {
		t.Fatalf("the run took %v of the clock, want at least %v", took, want)
	}
	if k := len(e.drain("target")); k != n {
		t.Fatalf("target holds %d", k)
	}
}

// TestRedriveBatchFIFO: batches keep FIFO working. From a FIFO dead-letter
// queue back to the FIFO source, each group's messages return in order with
// their ids and groups; from a standard dead-letter queue into a named FIFO
// queue, a message without a group gets its source queue's name as group.
func TestRedriveBatchFIFO(t *testing.T) {
	t.Run("back to a FIFO source", func(t *testing.T) {
		e := newEnv(t, nil)
		e.createQueue(QueueSettings{Name: "dlq.fifo", FIFO: true})
		e.createQueue(QueueSettings{Name: "src.fifo", FIFO: true, MaxReceives: 1, DeadLetterQueue: "dlq.fifo"})
		ids := map[string]string{} // body -> id
		for i := range 12 {
			g := "g" + strconv.Itoa(i%3)
			body := g + "-" + strconv.Itoa(i/3)
			res, err := e.b.Send(context.Background(), "src.fifo", []SendInput{{Body: []byte(body), GroupID: g, DedupID: body}})
			if err != nil || res[0].Err != nil {
				t.Fatal(err, res)
			}
			ids[body] = res[0].ID
		}
		// Only group heads are delivered: dead-letter them round by round.
		for range 5 {
			e.receive("src.fifo", 100)
			e.clock.Advance(time.Hour)
		}
		if st, _ := e.b.QueueStats("dlq.fifo"); st.Depth() != 12 {
			t.Fatalf("dlq holds %d, want 12", st.Depth())
		}
		task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq.fifo"})
		if err != nil {
			t.Fatal(err)
		}
		if done := e.waitRedrive(task.ID); done.Status != RedriveCompleted || done.Moved != 12 {
			t.Fatalf("task = %+v", done)
		}
		next := map[string]int{}
		for k := 0; k < 12; {
			ds := e.receive("src.fifo", 100)
			if len(ds) == 0 {
				t.Fatalf("only %d came back", k)
			}
			for _, d := range ds {
				want := d.GroupID + "-" + strconv.Itoa(next[d.GroupID])
				if string(d.Body) != want || d.ID != ids[want] || d.DeadLetter != nil {
					t.Fatalf("got %s (id %s, group %s, dead letter %v), want %s (id %s)", d.Body, d.ID, d.GroupID, d.DeadLetter, want, ids[want])
				}
				next[d.GroupID]++
				if err := e.b.Ack(context.Background(), "src.fifo", d.Receipt); err != nil {
					t.Fatal(err)
				}
				k++
			}
		}
	})
	t.Run("into a named FIFO queue", func(t *testing.T) {
		e := newEnv(t, nil)
		e.createQueue(QueueSettings{Name: "dlq"})
		e.createQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq"})
		e.createQueue(QueueSettings{Name: "t.fifo", FIFO: true})
		msgs := numbered("m", 7)
		e.deadLetterAll("src", msgs...)
		task, err := e.b.StartRedrive(RedriveRequest{Source: "dlq", Destination: "t.fifo"})
		if err != nil {
			t.Fatal(err)
		}
		if done := e.waitRedrive(task.ID); done.Status != RedriveCompleted || done.Moved != 7 {
			t.Fatalf("task = %+v", done)
		}
		var got []string
		for len(got) < len(msgs) {
			ds := e.receive("t.fifo", 100)
			if len(ds) != 1 {
				t.Fatalf("one group, so one at a time: got %d", len(ds))
			}
			if ds[0].GroupID != "src" {
				t.Fatalf("group %q, want the source queue's name", ds[0].GroupID)
			}
			got = append(got, string(ds[0].Body))
			if err := e.b.Ack(context.Background(), "t.fifo", ds[0].Receipt); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, msgs) {
			t.Fatalf("order %q, want %q", got, msgs)
		}
	})
}
