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

// CancelRedrive stops a running task, and waits for it to stop. A batch
// that is being sent finishes; one waiting for the rate limit is handed back
// to the dead-letter queue. Messages already moved stay moved.
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

// Batches. A step receives at most redriveBatchMax messages; at a rate
// limit, at most what the rate allows in redriveStep (but at least one), so
// the moves stay spread over each second instead of coming in bursts. One
// send to a destination carries at most redriveSendBytes of messages: a
// queue's log takes batches of up to 8 MiB, and messages may be 1 MiB each.
const (
	redriveBatchMax  = 100
	redriveStep      = 100 * time.Millisecond
	redriveSendBytes = 4 << 20
)

// redriveStepSize is how many messages one step of a task may receive.
func redriveStepSize(rate int) int {
	if rate <= 0 {
		return redriveBatchMax
	}
	return int(max(1, min(redriveBatchMax, int64(rate)*int64(redriveStep)/int64(time.Second))))
}

// redriveLoop examines at most r.depth messages (what the queue held at the
// start), so messages that arrive meanwhile, or that the filter skips, do not
// keep it running. A skipped message stays hidden in the dead-letter queue
// for redriveVisibility, so no later step receives it again.
func (b *Broker) redriveLoop(ctx context.Context, r *redriveRun) error {
	rate := r.task.RatePerSecond
	step := int64(redriveStepSize(rate))
	next := b.now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Never more than the limit leaves to move: with a filter, every
		// message of the batch may pass, and the limit must still hold.
		r.mu.Lock()
		want := min(step, r.depth-r.examined)
		if r.limit > 0 {
			want = min(want, r.limit-r.task.Moved)
		}
		r.mu.Unlock()
		if want <= 0 {
			return nil
		}
		ds, err := b.Receive(ctx, r.task.Source, ReceiveOptions{Max: int(want), Visibility: redriveVisibility})
		if err != nil || len(ds) == 0 {
			return err
		}
		move := make([]Delivery, 0, len(ds))
		for _, d := range ds {
			if (r.match == nil || r.match.accepts(&d.Message)) && (r.filter == nil || r.filter(&d.Message)) {
				move = append(move, d)
			}
		}
		// Where each one goes. A message with nowhere to go fails the task,
		// as it would have one message at a time: the ones before it still
		// move, it and the ones after it are handed back unexamined.
		dests, failed := b.redriveDestinations(r.task.Destination, move)
		var cut []Delivery
		if failed != nil {
			move, cut = move[:len(dests)], move[len(dests):]
		}
		r.mu.Lock()
		r.examined += int64(len(ds))
		r.task.Skipped += int64(len(ds) - len(move) - len(cut))
		r.holding = receiptsOf(move)
		r.mu.Unlock()
		b.releaseRedrive(r, receiptsOf(cut))
		if len(move) == 0 {
			if failed != nil {
				return failed
			}
			continue // all skipped: nothing to save or wait for
		}
		// Progress so far and the receipts of the batch about to move,
		// durable before the move: a restart hands those messages back.
		if err := b.saveRedrive(r); err != nil {
			b.releaseRedrive(r, receiptsOf(move))
			return fmt.Errorf("save progress: %w", err)
		}
		if rate > 0 {
			now := b.now()
			next = next.Add(time.Duration(len(move)) * time.Second / time.Duration(rate))
			if next.Before(now) {
				next = now // fell behind: no burst to catch up
			}
			err = r.sleep(ctx, next.Sub(now))
		} else {
			err = ctx.Err()
		}
		if err != nil {
			b.releaseRedrive(r, receiptsOf(move))
			return err
		}
		// Not cancelled half way: a cancel or Close stops after this batch.
		if err := b.redriveBatch(context.WithoutCancel(ctx), r, move, dests); err != nil {
			return err
		}
		if failed != nil {
			return failed
		}
	}
}

func receiptsOf(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Receipt
	}
	return out
}

// redriveDestinations finds the queue each message goes to: dest, or else
// the queue it was dead-lettered from. It stops at the first message that
// has none (or whose queue is gone), returning the queues of the ones
// before it and why.
func (b *Broker) redriveDestinations(dest string, ds []Delivery) ([]*queueRT, error) {
	qs := make([]*queueRT, 0, len(ds))
	for _, d := range ds {
		name := dest
		if name == "" && d.DeadLetter != nil {
			name = d.DeadLetter.SourceQueue
		}
		if name == "" {
			return qs, fmt.Errorf("message %s has no source queue to return to; name a destination", d.ID)
		}
		q, err := b.queue(name)
		if err != nil {
			return qs, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// redriveBatch sends a batch to its destinations (ds[i] to dests[i]), then
// acks, in one AckBatch, the messages whose copies are durable, and counts
// them as moved. What did not reach its destination is handed back to the
// dead-letter queue, and the first failure is returned.
func (b *Broker) redriveBatch(ctx context.Context, r *redriveRun, ds []Delivery, dests []*queueRT) error {
	// One list per destination, in the order received, so a FIFO
	// destination gets each group's messages in their order.
	var order []*queueRT
	byDest := map[*queueRT][]int{}
	for i, q := range dests {
		if _, ok := byDest[q]; !ok {
			order = append(order, q)
		}
		byDest[q] = append(byDest[q], i)
	}
	// The dead-letter record each copy is made from names the copy for a
	// FIFO destination's dedup (see copyDedupID).
	srcRecord := func(seq int64) string { return fmt.Sprintf("queue %s@%d", r.task.Source, seq) }
	if src, err := b.queue(r.task.Source); err == nil {
		srcRecord = src.queueRecord
	}
	sent := make([]bool, len(ds))
	var firstErr error
	for _, q := range order {
		idx := byDest[q]
		for len(idx) > 0 && firstErr == nil {
			n, size := 0, 0
			for n < len(idx) && (n == 0 || size+encodedSize(&ds[idx[n]].Message) <= redriveSendBytes) {
				size += encodedSize(&ds[idx[n]].Message)
				n++
			}
			firstErr = b.redriveSend(ctx, q, ds, idx[:n], sent, srcRecord)
			idx = idx[n:]
		}
		if firstErr != nil {
			break // the rest stay in the dead-letter queue
		}
	}
	var acks []string
	var ackOf []int // acks[k] is ds[ackOf[k]]'s
	for i, d := range ds {
		if sent[i] {
			acks = append(acks, d.Receipt)
			ackOf = append(ackOf, i)
		}
	}
	acked := make([]bool, len(ds))
	moved := 0
	if len(acks) > 0 {
		results, err := b.AckBatch(ctx, r.task.Source, acks)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("ack in %s: %w", r.task.Source, err)
		}
		for k, i := range ackOf {
			switch {
			case err == nil && results[k] == nil:
				acked[i] = true
				moved++
			case results != nil && results[k] != nil && firstErr == nil:
				firstErr = fmt.Errorf("ack %s in %s: %w", ds[i].ID, r.task.Source, results[k])
			}
		}
	}
	var back []string
	for i, d := range ds {
		if !acked[i] {
			back = append(back, d.Receipt)
		}
	}
	r.mu.Lock()
	r.task.Moved += int64(moved)
	r.holding = back // acked ones must not be counted again by a restart
	r.mu.Unlock()
	b.releaseRedrive(r, back)
	return firstErr
}

// redriveSend sends ds[i] for each i of idx to q, keeping each message's id,
// and marks in sent the ones now durable there.
func (b *Broker) redriveSend(ctx context.Context, q *queueRT, ds []Delivery, idx []int, sent []bool, srcRecord func(int64) string) error {
	in := make([]SendInput, len(idx))
	keep := make([]*Message, len(idx))
	for k, i := range idx {
		m := ds[i].Message
		keep[k] = &Message{ID: m.ID, SentAt: m.SentAt} // a fresh start: no dead-letter history
		// A FIFO destination gets the message's own group, or for one
		// without (from a standard queue) its source queue's name, and a
		// dedup id of this copy, so a copy sent again after a crash is
		// dropped but the next redrive of the same message is not.
		in[k] = dlqInput(&m, q, srcRecord(ds[i].Sequence))
	}
	res, err := q.send(ctx, in, keep)
	if err != nil {
		return fmt.Errorf("redrive %d messages to %s: %w", len(idx), q.name, err)
	}
	var firstErr error
	for k, i := range idx {
		if res[k].Err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("redrive %s to %s: %w", ds[i].ID, q.name, res[k].Err)
			}
			continue
		}
		sent[i] = true
	}
	return firstErr
}

// releaseRedrive hands messages a task holds back to the dead-letter queue
// at once (instead of after redriveVisibility), unexamined. When Close
// stopped the task the queues are closed already: the receipts stay in the
// task's file, and the next Open hands the messages back (takeBack).
func (b *Broker) releaseRedrive(r *redriveRun, receipts []string) {
	if len(receipts) == 0 {
		return
	}
	b.redrive.mu.Lock()
	stopping := b.redrive.stopping
	b.redrive.mu.Unlock()
	if stopping {
		return
	}
	for _, err := range b.nackAll(r.task.Source, receipts) {
		if err != nil {
			b.log.Warn("redrive: hand a message back", "task", r.task.ID, "err", err)
		}
	}
	gone := map[string]bool{}
	for _, rc := range receipts {
		gone[rc] = true
	}
	r.mu.Lock()
	r.examined -= int64(len(receipts))
	kept := r.holding[:0:0]
	for _, rc := range r.holding {
		if !gone[rc] {
			kept = append(kept, rc)
		}
	}
	r.holding = kept
	r.mu.Unlock()
}

// nackAll makes the messages of receipts visible again in queue at once,
// each with its own result. The nacks run together, so the queue's journal
// commits them in a few writes rather than one sync each.
func (b *Broker) nackAll(queue string, receipts []string) []error {
	errs := make([]error, len(receipts))
	var wg sync.WaitGroup
	for i, rc := range receipts {
		wg.Go(func() { errs[i] = b.Nack(context.Background(), queue, rc, 0, "") })
	}
	wg.Wait()
	return errs
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
