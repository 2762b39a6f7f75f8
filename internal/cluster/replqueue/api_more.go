package replqueue

import (
	"context"
	"fmt"
	"time"
)

// Put sends msgs in one entry (in order, committed together) and returns what became of
// each; keys are remembered for window (at least a second).
func (q *Queue) Put(ctx context.Context, msgs []Msg, window time.Duration) ([]PutOutcome, error) {
	if len(msgs) == 0 || len(msgs) > MaxPut {
		return nil, fmt.Errorf("replqueue: put of %d messages (1..%d)", len(msgs), MaxPut)
	}
	r, err := q.do(ctx, Command{Op: OpPut, Msgs: msgs, Window: max(window, time.Second)})
	return r.Puts, err
}

// ReceiveLimited is Receive with a receive limit: a message received maxReceives times
// already goes to the dead letters instead (Machine.DeadLetters). It reports how many did.
func (q *Queue) ReceiveLimited(ctx context.Context, max int, visibility time.Duration, maxReceives int) ([]Delivery, int, error) {
	if maxReceives <= 0 {
		ds, err := q.Receive(ctx, max, visibility)
		return ds, 0, err
	}
	r, err := q.do(ctx, Command{Op: OpReceiveLimited, Max: max, Timeout: visibility, MaxReceives: maxReceives})
	return r.Deliveries, r.Dead, err
}

// DeadDone drops dead letters whose copies are committed in the dead-letter queue.
func (q *Queue) DeadDone(ctx context.Context, offsets []int64) error {
	if len(offsets) == 0 || len(offsets) > MaxPut {
		return fmt.Errorf("replqueue: %d offsets (1..%d)", len(offsets), MaxPut)
	}
	_, err := q.do(ctx, Command{Op: OpDeadDone, Offsets: offsets})
	return err
}

// Purge finishes every message sent before it (delayed and in flight ones too; their
// receipts go stale). Dead letters already moved out keep going to the dead-letter queue.
func (q *Queue) Purge(ctx context.Context) error {
	_, err := q.do(ctx, Command{Op: OpPurge})
	return err
}

// Machine is the queue's state machine on this node.
func (q *Queue) Machine() *Machine { return q.sm }
