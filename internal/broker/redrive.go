package broker

import (
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
// duplicated, never lost. A task lives in memory; after a restart it is gone
// and the messages it had not moved are still in the dead-letter queue.

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
	// stay in the dead-letter queue.
	Filter func(*Message) bool
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
	mu     sync.Mutex // guards task
	task   RedriveTask
	cancel context.CancelFunc
	done   chan struct{}
}

type redrives struct {
	mu    sync.Mutex // guards tasks
	tasks map[string]*redriveRun
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
	ctx, cancel := context.WithCancel(context.Background())
	r := &redriveRun{cancel: cancel, done: make(chan struct{}), task: RedriveTask{
		ID: hex.EncodeToString(id[:]), Source: req.Source, Destination: req.Destination,
		Status: RedriveRunning, ToMove: toMove, RatePerSecond: req.RatePerSecond, StartedAt: b.now(),
	}}
	b.redrive.tasks[r.task.ID] = r
	b.redrive.pruneLocked()
	task := r.task
	go b.runRedrive(ctx, r, req, depth)
	return task, nil
}

// keepFinishedRedrives bounds how many finished tasks are remembered for
// GetRedrive and ListRedrives; older ones are forgotten.
const keepFinishedRedrives = 100

// pruneLocked forgets the oldest finished tasks beyond keepFinishedRedrives,
// so the task map does not grow with every redrive ever run. Called with
// rs.mu held.
func (rs *redrives) pruneLocked() {
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
		return
	}
	sort.Slice(done, func(i, j int) bool { return done[i].at.Before(done[j].at) })
	for _, f := range done[:len(done)-keepFinishedRedrives] {
		delete(rs.tasks, f.id)
	}
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
	if r.task.Status == RedriveRunning {
		r.task.Status = RedriveCancelling
	}
	r.mu.Unlock()
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

func (b *Broker) stopRedrives() {
	b.redrive.mu.Lock()
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

func (b *Broker) runRedrive(ctx context.Context, r *redriveRun, req RedriveRequest, depth int64) {
	defer close(r.done)
	err := b.redriveLoop(ctx, r, req, depth)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.task.FinishedAt = b.now()
	switch {
	case r.task.Status == RedriveCancelling || errors.Is(err, context.Canceled):
		r.task.Status = RedriveCancelled
	case err != nil:
		r.task.Status, r.task.Failure = RedriveFailed, err.Error()
		b.log.Warn("redrive failed", "task", r.task.ID, "source", r.task.Source, "err", err)
	default:
		r.task.Status = RedriveCompleted
	}
}

// redriveLoop examines at most depth messages (what the queue held at the
// start), so messages that arrive meanwhile, or that the filter skips, do not
// keep it running.
func (b *Broker) redriveLoop(ctx context.Context, r *redriveRun, req RedriveRequest, depth int64) error {
	var tick *time.Ticker
	if req.RatePerSecond > 0 {
		tick = time.NewTicker(time.Second / time.Duration(req.RatePerSecond))
		defer tick.Stop()
	}
	examined := int64(0)
	for {
		r.mu.Lock()
		moved := r.task.Moved
		r.mu.Unlock()
		if examined >= depth || (req.Limit > 0 && moved >= req.Limit) {
			return nil
		}
		ds, err := b.Receive(ctx, req.Source, ReceiveOptions{Max: 1, Visibility: redriveVisibility})
		if err != nil || len(ds) == 0 {
			return err
		}
		examined++
		d := ds[0]
		if req.Filter != nil && !req.Filter(&d.Message) {
			r.mu.Lock()
			r.task.Skipped++
			r.mu.Unlock()
			continue // stays hidden for redriveVisibility, so the loop does not see it again
		}
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				_ = b.Nack(context.Background(), req.Source, d.Receipt, 0, "")
				return ctx.Err()
			}
		}
		if err := b.redriveOne(ctx, req, d); err != nil {
			_ = b.Nack(context.Background(), req.Source, d.Receipt, 0, "")
			return err
		}
		r.mu.Lock()
		r.task.Moved++
		r.mu.Unlock()
	}
}

// redriveOne sends one message to its destination, then acks it in the
// dead-letter queue.
func (b *Broker) redriveOne(ctx context.Context, req RedriveRequest, d Delivery) error {
	dest := req.Destination
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
	return b.Ack(ctx, req.Source, d.Receipt)
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
