package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Redrive moves messages from a dead-letter queue back to where they came
// from (or to a named queue), the "redrive tooling" of the seeds.
//
// Each message is sent to its destination and only then acked in the
// dead-letter queue, so a crash between the two leaves it in both: at most
// duplicated, never lost.
//
// A task survives restarts and crashes (redrive_store.go): its definition and
// progress are saved in the data directory when it starts, before each move
// (with the receipt of the message about to move) and when it ends, and Open
// resumes the tasks that were running. The message a crash interrupted is
// handed back to the dead-letter queue at once (a nack of the saved receipt)
// and moved again by the resumed task: if its copy had already reached the
// destination it is duplicated there, never lost; if its ack had already
// landed, the stale receipt says so and it is counted as moved.

// Redrive task states.
const (
	RedriveRunning    = "RUNNING"
	RedriveCompleted  = "COMPLETED"
	RedriveCancelling = "CANCELLING"
	RedriveCancelled  = "CANCELLED"
	RedriveFailed     = "FAILED"
)

// ErrRedriveNotFound: no task with that id. ErrRedriveRunning: the queue
// already has a running task (one at a time per dead-letter queue, as SQS).
var (
	ErrRedriveNotFound = errors.New("redrive task does not exist")
	ErrRedriveRunning  = errors.New("a redrive task is already running for this queue")
)

// RedriveRequest starts a task.
type RedriveRequest struct {
	Source      string // the dead-letter queue
	Destination string // empty: each message's source queue
	// RatePerSecond limits moves; 0 is unlimited.
	RatePerSecond int
	// Limit stops after this many moves; 0 moves everything there now.
	Limit int64
	// Filter, when set, moves only the messages it accepts; the others
	// stay in the dead-letter queue. A function cannot be saved, so a task
	// with a Filter is not resumed after a restart: it ends FAILED, and the
	// messages it had not moved stay in the dead-letter queue. Prefer Match.
	Filter func(*Message) bool
	// Match, when set, moves only the messages it accepts, like Filter (with
	// both, a message must pass both). It is saved with the task, so the
	// task resumes after a restart with the same filter.
	Match *RedriveMatch
}

// RedriveMatch is a filter a task can save: a message passes if it was
// dead-lettered from SourceQueue (when set) and has every attribute of
// Attributes with the same value, and the same data type where one is
// given (an empty DataType matches any type).
type RedriveMatch struct {
	SourceQueue string               `json:"source_queue,omitempty"`
	Attributes  map[string]Attribute `json:"attributes,omitempty"`
}

func (f *RedriveMatch) accepts(m *Message) bool {
	if f.SourceQueue != "" && (m.DeadLetter == nil || m.DeadLetter.SourceQueue != f.SourceQueue) {
		return false
	}
	for k, want := range f.Attributes {
		got, ok := m.Attributes[k]
		if !ok || !bytes.Equal(got.Value, want.Value) || (want.DataType != "" && got.DataType != want.DataType) {
			return false
		}
	}
	return true
}

// RedriveTask is a task's progress.
type RedriveTask struct {
	ID                     string
	Source, Destination    string
	Status                 string
	Moved, ToMove, Skipped int64
	RatePerSecond          int
	StartedAt, FinishedAt  time.Time
	Failure                string
}

type redriveRun struct {
	// Fixed at start.
	limit      int64
	match      *RedriveMatch
	filter     func(*Message) bool // RedriveRequest.Filter; nil after a restart
	funcFilter bool                // started with a Filter, which a restart loses
	depth      int64               // how many messages to examine in all
	sleep      func(ctx context.Context, d time.Duration) error

	mu       sync.Mutex // guards task, examined and holding
	task     RedriveTask
	examined int64  // messages received from the dead-letter queue so far
	holding  string // receipt of the message being moved, if any

	saveMu sync.Mutex // serialises writes of the task's file

	cancel context.CancelFunc
	done   chan struct{}
}

type redrives struct {
	mu       sync.Mutex // guards tasks and stopping
	tasks    map[string]*redriveRun
	stopping bool // Close is stopping the tasks: they stay RUNNING, to resume at the next Open
}

// StartRedrive starts moving messages out of a dead-letter queue and
// returns at once; GetRedrive reports progress.
func (b *Broker) StartRedrive(req RedriveRequest) (RedriveTask, error) {
	src, err := b.queue(req.Source)
	if err != nil {
		return RedriveTask{}, err
	}
	if req.Destination != "" {
		if _, err := b.queue(req.Destination); err != nil {
			return RedriveTask{}, err
		}
	}
	if req.RatePerSecond < 0 || req.Limit < 0 {
		return RedriveTask{}, invalid("rate", "rate and limit must not be negative")
	}
	depth := src.stats().Depth()
	toMove := depth
	if req.Limit > 0 {
		toMove = min(toMove, req.Limit)
	}
	b.redrive.mu.Lock()
	defer b.redrive.mu.Unlock()
	if b.redrive.tasks == nil {
		b.redrive.tasks = map[string]*redriveRun{}
	}
	for _, r := range b.redrive.tasks {
		r.mu.Lock()
		busy := r.task.Source == req.Source && r.task.Status == RedriveRunning
		r.mu.Unlock()
		if busy {
			return RedriveTask{}, fmt.Errorf("%w: %s", ErrRedriveRunning, req.Source)
		}
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	r := &redriveRun{
		limit: req.Limit, match: req.Match, filter: req.Filter, funcFilter: req.Filter != nil,
		depth: depth, sleep: currentRedriveSleep(),
		task: RedriveTask{
			ID: hex.EncodeToString(id[:]), Source: req.Source, Destination: req.Destination,
			Status: RedriveRunning, ToMove: toMove, RatePerSecond: req.RatePerSecond, StartedAt: b.now(),
		},
	}
	// Durable before it is answered or moves anything, so a task that was
	// started is resumed after a crash.
	if err := b.saveRedrive(r); err != nil {
		return RedriveTask{}, fmt.Errorf("redrive: save task: %w", err)
	}
	b.redrive.tasks[r.task.ID] = r
	b.removeRedriveFiles(b.redrive.pruneLocked())
	task := r.task
	b.goRedrive(r)
	return task, nil
}

// goRedrive runs r's loop on its own goroutine.
func (b *Broker) goRedrive(r *redriveRun) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go b.runRedrive(ctx, r)
}

// keepFinishedRedrives bounds how many finished tasks are remembered for
// GetRedrive and ListRedrives; older ones are forgotten.
const keepFinishedRedrives = 100

// pruneLocked forgets the oldest finished tasks beyond keepFinishedRedrives,
// so the task map does not grow with every redrive ever run, and returns
// their ids. Called with rs.mu held.
func (rs *redrives) pruneLocked() []string {
	type finished struct {
		id string
		at time.Time
	}
	var done []finished
	for id, r := range rs.tasks {
		r.mu.Lock()
		if r.task.Status != RedriveRunning && r.task.Status != RedriveCancelling {
			done = append(done, finished{id, r.task.FinishedAt})
		}
		r.mu.Unlock()
	}
	if len(done) <= keepFinishedRedrives {
		return nil
	}
	sort.Slice(done, func(i, j int) bool { return done[i].at.Before(done[j].at) })
	var ids []string
	for _, f := range done[:len(done)-keepFinishedRedrives] {
		delete(rs.tasks, f.id)
		ids = append(ids, f.id)
	}
	return ids
}

// GetRedrive reports a task.
func (b *Broker) GetRedrive(id string) (RedriveTask, error) {
	b.redrive.mu.Lock()
	r := b.redrive.tasks[id]
	b.redrive.mu.Unlock()
	if r == nil {
		return RedriveTask{}, fmt.Errorf("%w: %s", ErrRedriveNotFound, id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.task, nil
}

// ListRedrives reports the tasks of a dead-letter queue (all when source is
// empty), newest first.
func (b *Broker) ListRedrives(source string) []RedriveTask {
	b.redrive.mu.Lock()
	var out []RedriveTask
	for _, r := range b.redrive.tasks {
		r.mu.Lock()
		if source == "" || r.task.Source == source {
			out = append(out, r.task)
		}
		r.mu.Unlock()
	}
	b.redrive.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out
}

// CancelRedrive stops a running task after the message it is moving, and
// waits for it to stop. Messages already moved stay moved.
func (b *Broker) CancelRedrive(id string) (RedriveTask, error) {
	b.redrive.mu.Lock()
	r := b.redrive.tasks[id]
	b.redrive.mu.Unlock()
	if r == nil {
		return RedriveTask{}, fmt.Errorf("%w: %s", ErrRedriveNotFound, id)
	}
	r.mu.Lock()
	cancelling := r.task.Status == RedriveRunning
	if cancelling {
		r.task.Status = RedriveCancelling
	}
	r.mu.Unlock()
	if cancelling {
		// Saved at once, so a crash before the task stops cannot resume it.
		if err := b.saveRedrive(r); err != nil {
			b.log.Warn("redrive: save cancel", "task", id, "err", err)
		}
	}
	r.cancel()
	<-r.done
	return b.GetRedrive(id)
}

// WaitRedrive blocks until a task finishes (tests and the CLI's progress).
func (b *Broker) WaitRedrive(ctx context.Context, id string) (RedriveTask, error) {
	b.redrive.mu.Lock()
	r := b.redrive.tasks[id]
	b.redrive.mu.Unlock()
	if r == nil {
		return RedriveTask{}, fmt.Errorf("%w: %s", ErrRedriveNotFound, id)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return RedriveTask{}, ctx.Err()
	}
	return b.GetRedrive(id)
}

// stopRedrives stops every task for Close. Running tasks stay RUNNING on
// disk, with the receipt of the message they held, so the next Open hands
// that message back and resumes them.
func (b *Broker) stopRedrives() {
	b.redrive.mu.Lock()
	b.redrive.stopping = true
	runs := make([]*redriveRun, 0, len(b.redrive.tasks))
	for _, r := range b.redrive.tasks {
		runs = append(runs, r)
	}
	b.redrive.mu.Unlock()
	for _, r := range runs {
		r.cancel()
		<-r.done
	}
}

// redriveVisibility hides a message while it is being moved; if the task
// dies, the message reappears in the dead-letter queue.
const redriveVisibility = 5 * time.Minute

func (b *Broker) runRedrive(ctx context.Context, r *redriveRun) {
	defer close(r.done)
	err := b.redriveLoop(ctx, r)
	b.redrive.mu.Lock()
	stopping := b.redrive.stopping
	b.redrive.mu.Unlock()
	r.mu.Lock()
	switch {
	case r.task.Status == RedriveCancelling:
		r.task.Status = RedriveCancelled
	case stopping && err != nil:
		// Close, not a cancel (the error is the cancel, or ErrClosed from a
		// queue): it stays RUNNING, to resume at the next Open.
	case errors.Is(err, context.Canceled):
		r.task.Status = RedriveCancelled
	case err != nil:
		r.task.Status, r.task.Failure = RedriveFailed, err.Error()
		b.log.Warn("redrive failed", "task", r.task.ID, "source", r.task.Source, "err", err)
	default:
		r.task.Status = RedriveCompleted
	}
	if r.task.Status != RedriveRunning {
		r.task.FinishedAt = b.now()
	}
	r.mu.Unlock()
	if err := b.saveRedrive(r); err != nil {
		b.log.Warn("redrive: save progress", "task", r.task.ID, "err", err)
	}
}

// redriveLoop examines at most r.depth messages (what the queue held at the
// start), so messages that arrive meanwhile, or that the filter skips, do not
// keep it running.
func (b *Broker) redriveLoop(ctx context.Context, r *redriveRun) error {
	var interval time.Duration
	if r.task.RatePerSecond > 0 {
		interval = time.Second / time.Duration(r.task.RatePerSecond)
	}
	next := b.now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.mu.Lock()
		finished := r.examined >= r.depth || (r.limit > 0 && r.task.Moved >= r.limit)
		r.mu.Unlock()
		if finished {
			return nil
		}
		ds, err := b.Receive(ctx, r.task.Source, ReceiveOptions{Max: 1, Visibility: redriveVisibility})
		if err != nil || len(ds) == 0 {
			return err
		}
		d := ds[0]
		skip := (r.match != nil && !r.match.accepts(&d.Message)) || (r.filter != nil && !r.filter(&d.Message))
		r.mu.Lock()
		r.examined++
		if skip {
			r.task.Skipped++
		} else {
			r.holding = d.Receipt
		}
		r.mu.Unlock()
		if skip {
			continue // stays hidden for redriveVisibility, so the loop does not see it again
		}
		// Progress so far and the receipt of the message about to move,
		// durable before the move: a restart hands that message back.
		if err := b.saveRedrive(r); err != nil {
			b.releaseRedrive(r, d.Receipt)
			return fmt.Errorf("save progress: %w", err)
		}
		if interval > 0 {
			now := b.now()
			next = next.Add(interval)
			if next.Before(now) {
				next = now // fell behind: no burst to catch up
			}
			if err := r.sleep(ctx, next.Sub(now)); err != nil {
				b.releaseRedrive(r, d.Receipt)
				return err
			}
		}
		// Not cancelled half way: a cancel or Close stops after this message.
		if err := b.redriveOne(context.WithoutCancel(ctx), r.task.Source, r.task.Destination, d); err != nil {
			b.releaseRedrive(r, d.Receipt)
			return err
		}
		r.mu.Lock()
		r.task.Moved++
		r.holding = ""
		r.mu.Unlock()
	}
}

// releaseRedrive hands the message a task holds back to the dead-letter
// queue at once (instead of after redriveVisibility), unexamined. When Close
// stopped the task the queues are closed already: the receipt stays in the
// task's file, and the next Open hands the message back (takeBack).
func (b *Broker) releaseRedrive(r *redriveRun, receipt string) {
	b.redrive.mu.Lock()
	stopping := b.redrive.stopping
	b.redrive.mu.Unlock()
	if stopping {
		return
	}
	if err := b.Nack(context.Background(), r.task.Source, receipt, 0, ""); err != nil {
		b.log.Warn("redrive: hand a message back", "task", r.task.ID, "err", err)
	}
	r.mu.Lock()
	r.examined--
	r.holding = ""
	r.mu.Unlock()
}

// redriveOne sends one message to its destination, then acks it in the
// dead-letter queue.
func (b *Broker) redriveOne(ctx context.Context, source, dest string, d Delivery) error {
	if dest == "" && d.DeadLetter != nil {
		dest = d.DeadLetter.SourceQueue
	}
	if dest == "" {
		return fmt.Errorf("message %s has no source queue to return to; name a destination", d.ID)
	}
	q, err := b.queue(dest)
	if err != nil {
		return err
	}
	m := d.Message
	keep := &Message{ID: m.ID, SentAt: m.SentAt} // a fresh start: no dead-letter history
	in := dlqInput(&m, q)
	if m.DeadLetter != nil && in.GroupID == m.DeadLetter.SourceQueue {
		in.GroupID = m.GroupID // back in its own queue it keeps its own group
	}
	res, err := q.send(ctx, []SendInput{in}, []*Message{keep})
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	if err != nil {
		return fmt.Errorf("redrive %s to %s: %w", m.ID, dest, err)
	}
	return b.Ack(ctx, source, d.Receipt)
}

// DeadLetterSources lists the queues whose dead-letter queue is name.
func (b *Broker) DeadLetterSources(name string) []string {
	var out []string
	for _, n := range b.ListQueues("") {
		if s, err := b.GetQueue(n); err == nil && s.DeadLetterQueue == name {
			out = append(out, n)
		}
	}
	return out
}
