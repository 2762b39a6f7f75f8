package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// Errors of receipts, re-exported from the cursor so front-ends need only
// this package.
var (
	ErrReceiptStale   = queue.ErrReceiptStale   // a newer delivery exists, or the message is finished
	ErrReceiptInvalid = queue.ErrReceiptInvalid // not a receipt this broker issued
	ErrNotInFlight    = queue.ErrNotInFlight    // extend of a delivery whose visibility already ran out
	ErrExtensionLimit = queue.ErrExtensionLimit // extension past the queue's MaxExtension
)

// Delivery is a received message with its lease. Its Message's Body,
// Attributes and System may be shared with other deliveries of the same
// message (they come from the queue's cache): read them, do not modify them.
type Delivery struct {
	Message
	Sequence        int64
	Receipt         string
	ReceiveCount    int
	FirstReceivedAt time.Time
	Deadline        time.Time
	FencingToken    uint64
}

// WaitQueueDefault asks Receive to use the queue's ReceiveWait setting.
const WaitQueueDefault = time.Duration(-1)

// ReceiveOptions shape one receive.
type ReceiveOptions struct {
	Max        int           // 1 to 10,000; default 1
	Visibility time.Duration // 0: the queue's visibility timeout
	Wait       time.Duration // long-poll; WaitQueueDefault for the queue's setting
}

// MaxReceiveBatch bounds one receive.
const MaxReceiveBatch = 10_000

// Receive hands out up to opts.Max visible messages, each hidden for the
// visibility timeout, and returns once those deliveries are journaled (so
// receive counts survive a crash). With a wait, it blocks until a message
// arrives or becomes visible, the wait ends, or ctx ends; a send wakes it at
// once.
func (b *Broker) Receive(ctx context.Context, queueName string, opts ReceiveOptions) ([]Delivery, error) {
	if b.cluster != nil && b.cluster.clusteredQueue(queueName) {
		return b.cluster.receiveQueue(ctx, queueName, opts)
	}
	q, err := b.queue(queueName)
	if err != nil {
		return nil, err
	}
	if opts.Max == 0 {
		opts.Max = 1
	}
	if opts.Max < 0 || opts.Max > MaxReceiveBatch {
		return nil, invalid("max", "%d: want 1 to %d", opts.Max, MaxReceiveBatch)
	}
	if opts.Wait == WaitQueueDefault {
		opts.Wait = q.settings().ReceiveWait
	}
	if opts.Wait < 0 {
		return nil, invalid("wait", "%v: must not be negative", opts.Wait)
	}
	return longPoll(ctx, opts.Wait, q.now, func() ([]Delivery, <-chan struct{}, time.Time, error) {
		return q.receiveOnce(ctx, opts)
	})
}

// longPoll calls try until it hands out something or fails; with nothing to
// hand out it sleeps until try's wake channel closes (a send, a nack), the
// time try says something comes due, the wait ends, or ctx ends. No polling:
// every wake-up has a cause.
func longPoll[T any](ctx context.Context, wait time.Duration, now func() time.Time,
	try func() ([]T, <-chan struct{}, time.Time, error)) ([]T, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		out, wake, due, err := try()
		if err != nil || len(out) > 0 || wait == 0 {
			return out, err
		}
		if !waitForWork(ctx, wake, due, now(), timeout) {
			return nil, ctx.Err()
		}
	}
}

// waitForWork blocks until wake is closed, due (if set) passes, timeout
// fires or ctx ends. It reports whether to try again.
func waitForWork(ctx context.Context, wake <-chan struct{}, due, now time.Time, timeout <-chan time.Time) bool {
	var dueC <-chan time.Time
	if !due.IsZero() {
		dt := time.NewTimer(max(due.Sub(now), time.Millisecond))
		defer dt.Stop()
		dueC = dt.C
	}
	select {
	case <-wake:
	case <-dueC:
	case <-timeout:
		return false
	case <-ctx.Done():
		return false
	}
	return true
}

// receiveOnce tries one receive. With nothing to deliver it returns the
// channel a send will close and the next time something comes due.
func (q *queueRT) receiveOnce(ctx context.Context, opts ReceiveOptions) ([]Delivery, <-chan struct{}, time.Time, error) {
	if err := q.lockChecked(); err != nil {
		return nil, nil, time.Time{}, err
	}
	now := q.now()
	evs, err := q.fillLocked(now)
	if err != nil {
		done := q.journalLocked(evs)
		q.mu.Unlock()
		return nil, nil, time.Time{}, errors.Join(err, q.wait(done))
	}
	ds, more, err := q.cur().Receive(now, opts.Max, opts.Visibility)
	if err != nil {
		done := q.journalLocked(evs)
		q.mu.Unlock()
		return nil, nil, time.Time{}, errors.Join(mapCursorErr(err), q.wait(done))
	}
	recs, dead := splitDeadLetters(onCursor(nil, 0, append(evs, more...)))
	done := q.recordLocked(recs)
	wake := q.wake
	due, _ := q.cur().NextDue()
	cached := q.cachedLocked(ds)
	aheadPos, aheadKeep, readAhead := q.planReadAheadLocked()
	q.mu.Unlock()

	if readAhead {
		q.readAhead(aheadPos, aheadKeep) // while the journal writes our events
	}
	err = q.wait(done)
	if err == nil && len(dead) > 0 {
		err = q.deadLetter(ctx, q.b, q.settings().DeadLetterQueue, dead, q.deadLetterCopies)
	}
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("receive from %s: %w", q.name, err)
	}
	if len(ds) == 0 {
		return nil, wake, due, nil
	}
	out, err := q.deliveries(ds, cached)
	return out, wake, due, err
}

// deliveries joins the cursor's deliveries with their messages: from the
// cache where it has them (cached[i], may be nil), else from the log.
func (q *queueRT) deliveries(ds []queue.Delivery, cached []*Message) ([]Delivery, error) {
	var offs []int64
	for i, d := range ds {
		if cached[i] == nil {
			offs = append(offs, d.Offset)
		}
	}
	var msgs map[int64]*Message
	if len(offs) > 0 {
		var err error
		if msgs, err = readMessages(q.log, offs); err != nil {
			return nil, err
		}
	}
	out := make([]Delivery, 0, len(ds))
	var lost []int64
	for i, d := range ds {
		m := cached[i]
		if m == nil {
			m = msgs[d.Offset]
		}
		if m == nil {
			lost = append(lost, d.Offset)
			continue
		}
		out = append(out, Delivery{Message: *m, Sequence: d.Offset, Receipt: q.receiptOf(0, d),
			ReceiveCount: d.ReceiveCount, FirstReceivedAt: d.FirstReceivedAt, Deadline: d.Deadline,
			FencingToken: d.FencingToken})
	}
	if len(lost) > 0 {
		if err := q.lose(0, lost); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Ack deletes the message a current receipt names. A stale receipt (the
// message was delivered again, or is finished) is refused with
// ErrReceiptStale and changes nothing.
func (b *Broker) Ack(ctx context.Context, queueName, receipt string) error {
	if b.cluster != nil && b.cluster.clusteredQueue(queueName) {
		return b.cluster.ackQueue(ctx, queueName, receipt)
	}
	q, err := b.queue(queueName)
	if err != nil {
		return err
	}
	return q.lease(q.now, receipt, ackLease)
}

// AckBatch acks several deliveries in one journal write. Each receipt gets
// its own result (nil, or why it was refused); the call's error is for the
// queue as a whole.
func (b *Broker) AckBatch(ctx context.Context, queueName string, receipts []string) ([]error, error) {
	if b.cluster != nil && b.cluster.clusteredQueue(queueName) {
		return b.cluster.ackBatchQueue(ctx, queueName, receipts)
	}
	q, err := b.queue(queueName)
	if err != nil {
		return nil, err
	}
	return q.leaseBatch(q.now, receipts, ackLease)
}

// AckBatchStaged is AckBatch in two steps, for a caller that has work to
// submit behind the acks: it returns once they are applied in memory and
// submitted to the queue's journal, and durable waits until they are on
// disk. An ack may be reported done only once durable returned nil. What
// the caller submits to the same queue after this returns (a receive, say)
// is journaled in the same write or after it, so the two share an fdatasync
// when they come together and the later one is never durable without the
// acks. A clustered queue's acks are durable (replicated) before it
// returns.
func (b *Broker) AckBatchStaged(ctx context.Context, queueName string, receipts []string) ([]error, func() error, error) {
	if b.cluster != nil && b.cluster.clusteredQueue(queueName) {
		errs, err := b.cluster.ackBatchQueue(ctx, queueName, receipts)
		return errs, func() error { return nil }, err
	}
	q, err := b.queue(queueName)
	if err != nil {
		return nil, nil, err
	}
	return q.leaseBatchStaged(q.now, receipts, ackLease)
}

// Extend keeps a delivery hidden until now+d (a heartbeat). The total time
// since the receive is bounded by the queue's MaxExtension. d = 0 makes the
// message visible again at once.
func (b *Broker) Extend(ctx context.Context, queueName, receipt string, d time.Duration) error {
	if b.cluster != nil && b.cluster.clusteredQueue(queueName) {
		return b.cluster.extendQueue(ctx, queueName, receipt, d)
	}
	q, err := b.queue(queueName)
	if err != nil {
		return err
	}
	return q.lease(q.now, receipt, extendLease(d))
}

// Nack releases a delivery: visible again after delay (0: at once), with a
// reason kept for the dead-letter queue.
func (b *Broker) Nack(ctx context.Context, queueName, receipt string, delay time.Duration, reason string) error {
	if b.cluster != nil && b.cluster.clusteredQueue(queueName) {
		return b.cluster.nackQueue(ctx, queueName, receipt, delay, reason)
	}
	q, err := b.queue(queueName)
	if err != nil {
		return err
	}
	return q.lease(q.now, receipt, nackLease(delay, reason))
}

// The lease operations queues and subscriptions share.
func ackLease(c *queue.Cursor, now time.Time, r string) ([]queue.Event, error) {
	return c.Ack(now, r)
}

func extendLease(d time.Duration) leaseFunc {
	return func(c *queue.Cursor, now time.Time, r string) ([]queue.Event, error) { return c.Extend(now, r, d) }
}

func nackLease(delay time.Duration, reason string) leaseFunc {
	return func(c *queue.Cursor, now time.Time, r string) ([]queue.Event, error) {
		return c.Nack(now, r, delay, reason)
	}
}
