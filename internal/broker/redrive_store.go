package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// Redrive tasks on disk, one file per task in Options.Dir/redrives:
//
//	redrives/<id>.json   the task's definition and progress (crash-atomic rewrite)
//
// A file is written when its task starts (before StartRedrive answers),
// before each batch is moved (with the receipts of the messages about to
// move), when a cancel is asked for, and when the task ends or Close stops
// it. Each write replaces the whole file (writeFileAtomic), so after a crash
// it holds one of the states the task went through, never a mix.
//
// What a crash can cost, at the point it strikes (each message of the batch
// is settled on its own at Open, by the nack of its receipt):
//
//   - between a batch's ack and the next save: the batch is moved and its
//     acks durable, but the file still holds its receipts. At Open each
//     nack is refused as stale, which means the ack landed: the message is
//     counted as moved. (A receipt could also be stale because the message
//     was purged, or another consumer took it after redriveVisibility ran
//     out; it is then counted as moved too.)
//   - between the sends and the ack: some or all of the copies are in their
//     destinations, the messages still in the dead-letter queue. At Open the
//     nacks succeed and the resumed task moves them again: at most one
//     batch of duplicates.
//   - between the receive and the save: the batch is hidden in the
//     dead-letter queue for redriveVisibility and the file does not name it.
//     If the resumed task finishes before it reappears, it stays in the
//     dead-letter queue (not moved, not lost).
//
// Skips are saved with the next batch that moves, so after a crash the skip
// count may be lower and the task may examine that many messages more.
const redriveDirName = "redrives"

// redriveRecord is a task's file.
type redriveRecord struct {
	Version int           `json:"version"`
	Task    RedriveTask   `json:"task"`
	Limit   int64         `json:"limit,omitempty"`
	Match   *RedriveMatch `json:"match,omitempty"`
	// FuncFilter: started with a RedriveRequest.Filter, which cannot be
	// saved, so the task cannot resume.
	FuncFilter bool  `json:"func_filter,omitempty"`
	Depth      int64 `json:"depth"`
	Examined   int64 `json:"examined"`
	// Receipts of the batch being moved (version 2).
	Holding []string `json:"holding_batch,omitempty"`
	// HoldingOne is the receipt of the message being moved in a version 1
	// file, which moved one message at a time; read, never written.
	HoldingOne string `json:"holding,omitempty"`
}

// redriveRecordVersion 2 holds a batch of receipts; 1 held one.
const redriveRecordVersion = 2

func (b *Broker) redriveDir() string { return filepath.Join(b.opts.Dir, redriveDirName) }

// saveRedrive writes r's current state durably. Writes of one task are
// serialised and each takes the state as it is when its turn comes, so the
// file never goes back to an older state.
func (b *Broker) saveRedrive(r *redriveRun) error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	rec := redriveRecord{
		Version: redriveRecordVersion, Task: r.task, Limit: r.limit, Match: r.match, FuncFilter: r.funcFilter,
		Depth: r.depth, Examined: r.examined, Holding: r.holding,
	}
	r.mu.Unlock()
	buf, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	dir := b.redriveDir()
	if err := vfs.MkdirAllDurable(b.opts.FS, dir); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(b.opts.FS, dir, rec.Task.ID+".json", buf)
}

// removeRedriveFiles deletes the files of tasks pruneLocked forgot. A file
// that survives a crash is pruned again at the next Open.
func (b *Broker) removeRedriveFiles(ids []string) {
	for _, id := range ids {
		if err := b.opts.FS.Remove(filepath.Join(b.redriveDir(), id+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.log.Warn("redrive: remove a finished task", "task", id, "err", err)
		}
	}
}

// resumeRedrives loads the saved tasks at Open. A task that was running
// gets back the messages it held and starts again where it stopped; one that
// was being cancelled ends CANCELLED; one started with a Filter function
// ends FAILED (a function cannot be saved). Finished tasks are listed again,
// the newest keepFinishedRedrives of them.
func (b *Broker) resumeRedrives() error {
	names, err := b.opts.FS.List(b.redriveDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redrive tasks: %w", err)
	}
	var resume []*redriveRun
	b.redrive.mu.Lock()
	defer b.redrive.mu.Unlock()
	if b.redrive.tasks == nil {
		b.redrive.tasks = map[string]*redriveRun{}
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".json") {
			continue // a temporary file a crash left behind; the next save replaces it
		}
		path := filepath.Join(b.redriveDir(), name)
		buf, err := vfs.ReadFile(b.opts.FS, path)
		if err != nil {
			return fmt.Errorf("redrive task %s: %w", path, err)
		}
		var rec redriveRecord
		if err := json.Unmarshal(buf, &rec); err != nil || rec.Task.ID+".json" != name {
			// Atomic writes make this a damaged disk, not a crash. The
			// messages are safe in the dead-letter queue; do not refuse to
			// start over a progress report.
			b.log.Error("redrive: ignoring an unreadable task file", "path", path, "err", err)
			continue
		}
		r := &redriveRun{
			limit: rec.Limit, match: rec.Match, funcFilter: rec.FuncFilter, depth: rec.Depth,
			sleep: currentRedriveSleep(), task: rec.Task, examined: rec.Examined, holding: rec.Holding,
		}
		if rec.HoldingOne != "" {
			r.holding = append(r.holding, rec.HoldingOne)
		}
		b.redrive.tasks[r.task.ID] = r
		if r.task.Status != RedriveRunning && r.task.Status != RedriveCancelling {
			r.cancel, r.done = func() {}, closedChan
			continue
		}
		b.takeBack(r)
		switch {
		case r.task.Status == RedriveCancelling:
			r.task.Status, r.task.FinishedAt = RedriveCancelled, b.now()
		case r.funcFilter:
			r.task.Status, r.task.FinishedAt = RedriveFailed, b.now()
			r.task.Failure = "stopped by a restart: its filter was a function, which cannot be saved; start it again"
		}
		if err := b.saveRedrive(r); err != nil {
			return fmt.Errorf("redrive task %s: %w", r.task.ID, err)
		}
		if r.task.Status != RedriveRunning {
			r.cancel, r.done = func() {}, closedChan
			continue
		}
		resume = append(resume, r)
	}
	b.removeRedriveFiles(b.redrive.pruneLocked())
	for _, r := range resume {
		b.log.Info("redrive resumed", "task", r.task.ID, "source", r.task.Source, "moved", r.task.Moved, "to_move", r.task.ToMove)
		b.goRedrive(r)
	}
	return nil
}

// takeBack settles the batch a task held when the broker stopped, message
// by message: a nack makes a message visible for the resumed task to move
// (again); a stale receipt means its ack landed, so it was moved.
func (b *Broker) takeBack(r *redriveRun) {
	if len(r.holding) == 0 {
		return
	}
	if q, err := b.queue(r.task.Source); err == nil {
		// A batch held across an upgrade has receipts of the first
		// format: ours, so bound to the source rather than refused.
		for i, rc := range r.holding {
			r.holding[i] = q.bind.rebindLegacy(rc)
		}
	}
	for _, err := range b.nackAll(r.task.Source, r.holding) {
		switch {
		case err == nil:
			r.examined--
		case errors.Is(err, ErrReceiptStale):
			r.task.Moved++
		default:
			// The queue is gone, or its journal failed: the resumed task will
			// fail on it too. The message reappears after redriveVisibility.
			b.log.Warn("redrive: hand a message back", "task", r.task.ID, "err", err)
			r.examined--
		}
	}
	r.holding = nil
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// redriveSleepHook, when set, replaces sleepCtx as the rate limit's wait of
// tasks started or resumed from then on: tests drive the fake clock with it.
var redriveSleepHook atomic.Pointer[func(ctx context.Context, d time.Duration) error]

func currentRedriveSleep() func(ctx context.Context, d time.Duration) error {
	if h := redriveSleepHook.Load(); h != nil {
		return *h
	}
	return sleepCtx
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
