package replpart

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
)

// Dead letters of a subscription's cursor, replqueue's three steps over two groups
// (docs/cluster.md, "Subscriptions", its "Dead-letter queue"):
//
//  1. a limited Receive (CursorReceiveLimited, the limit in the entry: the subscription's
//     redrive policy as the proposer read it) finishes a record received more than the
//     limit in the cursor, as an ack would (which lets the next record of its key go in a
//     key-ordered cursor), and keeps its offset here, in the partition's group and its
//     snapshot;
//  2. the partition's leader copies the record, read from its local log, into the
//     dead-letter queue's group under a key that makes a repeated copy a duplicate;
//  3. a DeadDone entry drops the offsets whose copies are committed.
//
// A crash or a failover between the steps leaves the offset here, and the next leader
// copies it again: a record is in the dead letters, in the dead-letter queue, or (a copy
// retried after that queue's deduplication window) in it twice; never in neither.

// DeadLetter is a record of a subscription's cursor waiting for its copy.
type DeadLetter struct {
	Offset       int64
	ReceiveCount int // the receives it had before the one that moved it
}

// receiveLimited receives up to op.Max records; one whose receive count passes limit is
// moved to the dead letters and another received in its place. Under the Machine's mu.
func (sc *subCursor) receiveLimited(rl RecordLog, now time.Time, op replcursor.Op, limit int) (CursorResult, error) {
	var out []queue.Delivery
	for want := op.Max; want > 0; {
		if err := fill(sc, rl, now); err != nil {
			return CursorResult{}, err
		}
		ds, _, err := sc.cur.Receive(now, want, op.Timeout)
		if f := sc.cur.Fault(); f != nil {
			return CursorResult{}, fmt.Errorf("cursor fault: %w", f)
		}
		if err != nil {
			return CursorResult{Deliveries: out, Err: err}, nil
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if d.ReceiveCount <= limit {
				out = append(out, d)
				want--
				continue
			}
			// Finished as a dead letter rather than acked, so the cursor counts it as one
			// (stats); the state is the same either way, so replicas that acked it before this
			// release agree on everything but that counter.
			if _, err := sc.cur.DeadLetter(now, d.Receipt, ""); err != nil {
				// The receipt was issued a moment ago: the cursor's state is wrong.
				return CursorResult{}, fmt.Errorf("dead-lettering offset %d: %w", d.Offset, err)
			}
			if sc.dead == nil {
				sc.dead = map[int64]int{}
			}
			sc.dead[d.Offset] = d.ReceiveCount - 1
		}
	}
	return CursorResult{Deliveries: out}, nil
}

// deadLetter finishes the delivery receipt names and keeps it among the dead letters, with
// the receives it had (the one it is dead-lettered from included). A receipt that is not
// current is the proposer's refusal (queue.ErrReceiptStale, ErrReceiptInvalid), as an Ack's.
func (sc *subCursor) deadLetter(now time.Time, receipt string) (CursorResult, error) {
	evs, err := sc.cur.DeadLetter(now, receipt, "")
	if f := sc.cur.Fault(); f != nil {
		return CursorResult{}, fmt.Errorf("cursor fault: %w", f)
	}
	if err != nil {
		return CursorResult{Err: err}, nil
	}
	for _, ev := range evs {
		if d, ok := ev.(queue.DeadLettered); ok {
			if sc.dead == nil {
				sc.dead = map[int64]int{}
			}
			sc.dead[d.Offset] = d.Count
		}
	}
	return CursorResult{}, nil
}

// DeadLetter finishes the delivery a receipt names and keeps its record among the
// subscription's dead letters (DeadLetters), for the leader to copy: as Ack, but the record
// is kept for a dead-letter queue.
func (p *Partition) DeadLetter(ctx context.Context, sub uint64, receipt string) error {
	_, err := p.cursor(ctx, CursorEntry{Sub: sub, Kind: CursorDeadLetter, Op: replcursor.Op{Receipt: receipt}})
	return err
}

// deadDone drops dead letters whose copies are committed; offsets it does not hold (done
// already, by an earlier leader's entry) are ignored.
func (sc *subCursor) deadDone(offs []int64) {
	for _, off := range offs {
		delete(sc.dead, off)
	}
}

// DeadLetters are up to n of subscription sub's dead letters here, lowest offset first.
func (m *Machine) DeadLetters(sub uint64, n int) []DeadLetter {
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.cursors[sub]
	if sc == nil {
		return nil
	}
	return sc.deadLetters(n)
}

// deadLetters are up to n dead letters, lowest offset first (nil: none).
func (sc *subCursor) deadLetters(n int) []DeadLetter {
	if len(sc.dead) == 0 || n <= 0 {
		return nil
	}
	offs := slices.Sorted(maps.Keys(sc.dead))
	out := make([]DeadLetter, 0, min(n, len(offs)))
	for _, off := range offs[:min(n, len(offs))] {
		out = append(out, DeadLetter{Offset: off, ReceiveCount: sc.dead[off]})
	}
	return out
}

// DeadCount is how many dead letters subscription sub has here.
func (m *Machine) DeadCount(sub uint64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sc := m.cursors[sub]; sc != nil {
		return len(sc.dead)
	}
	return 0
}

// ReceiveLimited is Receive with a receive limit: a record received more than limit times
// goes to the subscription's dead letters here (DeadLetters) instead of to the caller.
func (p *Partition) ReceiveLimited(ctx context.Context, sub uint64, max int, visibility time.Duration, limit int) ([]queue.Delivery, error) {
	return p.cursor(ctx, CursorEntry{Sub: sub, Kind: CursorReceiveLimited, Op: replcursor.Op{Max: max, Timeout: visibility}, Limit: limit})
}

// DeadDone drops dead letters of subscription sub whose copies are committed.
func (p *Partition) DeadDone(ctx context.Context, sub uint64, offs []int64) error {
	_, err := p.cursor(ctx, CursorEntry{Sub: sub, Kind: CursorDeadDone, Offsets: offs})
	return err
}
