package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Redrive moves messages from a dead-letter queue back to where they came
// from (or to a named queue), the "redrive tooling" of the seeds.
//
// A task moves messages in batches, one batch per step: it receives up to
// redriveBatchMax messages (fewer when the limit, or the rate limit, allows
// fewer), saves its progress with the receipts of the ones the filter
// accepts, sends them to their destinations (one send per destination queue,
// or a few for large messages), and only then acks them all in the
// dead-letter queue with one AckBatch. So a crash between the sends and the
// ack leaves the batch in both queues: at most duplicated, never lost. A
// step costs about five disk syncs whatever its size, instead of five per
// message.
//
// A task survives restarts and crashes (redrive_store.go): its definition and
// progress are saved in the data directory when it starts, before each batch
// (with the receipts of the messages about to move) and when it ends, and
// Open resumes the tasks that were running. The batch a crash interrupted is
// handed back to the dead-letter queue at once (a nack of each saved receipt)
// and moved again by the resumed task: the messages whose copies had already
// reached their destinations are duplicated there, never lost; a message
// whose ack had already landed has a stale receipt, which says so, and it is
// counted as moved.

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
	examined int64    // messages received from the dead-letter queue so far
	holding  []string // receipts of the batch being moved, if any

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
	depth, err := b.redriveDepth(req)
	if err != nil {
		return RedriveTask{}, err
	}
	if req.RatePerSecond < 0 || req.Limit < 0 {
		return RedriveTask{}, invalid("rate", "rate and limit must not be negative")
	}
	if err := b.disk.Admit(); err != nil {
		return RedriveTask{}, err
	}
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
			ID: b.redriveID(id), Source: req.Source, Destination: req.Destination,
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

// redriveDepth checks a request's queues and returns how many messages the source holds.
func (b *Broker) redriveDepth(req RedriveRequest) (int64, error) {
	if b.cluster != nil && (b.cluster.clusteredQueue(req.Source) || b.cluster.clusteredQueue(req.Destination)) {
		return b.cluster.redriveDepth(req) // cluster_queues_redrive.go
	}
	src, err := b.queue(req.Source)
	if err != nil {
		return 0, err
	}
	if req.Destination != "" {
		if _, err := b.queue(req.Destination); err != nil {
			return 0, err
		}
	}
	return src.stats().Depth(), nil
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
		return RedriveTask{}, b.redriveElsewhere(id)
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

// CancelRedrive stops a running task, and waits for it to stop. A batch
// that is being sent finishes; one waiting for the rate limit is handed back
// to the dead-letter queue. Messages already moved stay moved.
func (b *Broker) CancelRedrive(id string) (RedriveTask, error) {
	b.redrive.mu.Lock()
	r := b.redrive.tasks[id]
	b.redrive.mu.Unlock()
	if r == nil {
		return RedriveTask{}, b.redriveElsewhere(id)
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
// disk, with the receipts of the batch they held, so the next Open hands
// those messages back and resumes them.
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
