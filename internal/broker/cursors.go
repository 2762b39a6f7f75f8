package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// cursorSet is what a queue and a subscription share above their machine:
// queue cursors (one for a queue, one per partition for a subscription), the
// receipts that name them, lease operations (ack, extend, nack), the
// counters, and when an operation wakes long-polls. Both read their cursors
// through it, so a behaviour fixed here holds for both.
//
// A queue's journal records are bare cursor events and its receipts are the
// cursor's. A subscription's (partitioned) records start with a uvarint
// partition and its receipts with "<partition>:".
type cursorSet struct {
	machine
	// partitioned: records and receipts name the partition (subscriptions).
	partitioned bool
	// ordered says whether finishing a message may make the next one of its
	// group visible (FIFO queues, key-ordered subscriptions).
	ordered func() bool
	// finished, if set, hears of every event journaled (the queue's cache
	// drops what was acked). Called with mu held.
	finished func([]queue.Event)
	// bind is what its receipts are bound to (receipt.go).
	bind receiptBinding

	// Guarded by mu.
	curs []*queue.Cursor
	ctr  cursorCounters
}

// cursorCounters are totals since the broker started (not durable: the
// durable ones are the cursors' own, see queue.Stats).
type cursorCounters struct {
	staleRefused uint64
	// recoveredGap: messages found lost at open because the journal knew
	// offsets the log had lost (queue_gap.go).
	recoveredGap uint64
}

// cursorEvent is a cursor event with the index of its cursor.
type cursorEvent struct {
	cursor int
	ev     queue.Event
}

// onCursor tags events of cursor i.
func onCursor(recs []cursorEvent, i int, evs []queue.Event) []cursorEvent {
	for _, ev := range evs {
		recs = append(recs, cursorEvent{i, ev})
	}
	return recs
}

// recordLocked journals cursor events in the order applied and returns the
// channel reporting their durability. Called with mu held.
func (cs *cursorSet) recordLocked(recs []cursorEvent) <-chan error {
	if cs.finished != nil && len(recs) > 0 {
		evs := make([]queue.Event, len(recs))
		for i, r := range recs {
			evs[i] = r.ev
		}
		cs.finished(evs)
	}
	enc := make([][]byte, len(recs))
	for i, r := range recs {
		var prefix []byte
		if cs.partitioned {
			prefix = binary.AppendUvarint(nil, uint64(r.cursor))
		}
		b, err := r.ev.AppendBinary(prefix)
		if err != nil {
			return failed(err)
		}
		enc[i] = b
	}
	return cs.machine.recordLocked(enc)
}

// decodeRecord is the inverse of recordLocked's encoding, for replay.
func (cs *cursorSet) decodeRecord(off int64, v []byte) (int, queue.Event, error) {
	p := uint64(0)
	if cs.partitioned {
		var k int
		p, k = binary.Uvarint(v)
		if k <= 0 || p >= uint64(len(cs.curs)) {
			return 0, nil, fmt.Errorf("journal offset %d: bad partition", off)
		}
		v = v[k:]
	}
	ev, err := queue.UnmarshalEvent(v)
	return int(p), ev, err
}

// applyRecord replays one journal record into the cursors. An event that no
// longer fits (say, a dead-letter journaled after a purge of the same
// message) is logged and skipped: refusing to open would lose everything
// else.
func (cs *cursorSet) applyRecord(off int64, v []byte) error {
	p, ev, err := cs.decodeRecord(off, v)
	if err == nil {
		err = cs.curs[p].Apply(ev)
	}
	if errors.Is(err, queue.ErrBadEvent) {
		cs.logger.Warn("journal event skipped", "offset", off, "err", err)
		return nil
	}
	return err
}

// cursorFault is the first fault a cursor caught in itself (machineHooks.fault).
func (cs *cursorSet) cursorFault() error {
	for _, c := range cs.curs {
		if err := c.Fault(); err != nil {
			return err
		}
	}
	return nil
}

// parseReceipt checks a receipt is one of this set's (receipt.go) and
// splits it into its cursor and the cursor's receipt.
func (cs *cursorSet) parseReceipt(receipt string) (int, string, error) {
	p, r, err := cs.bind.open(receipt)
	if err != nil {
		return 0, "", err
	}
	if p >= len(cs.curs) || (!cs.partitioned && p != 0) {
		return 0, "", fmt.Errorf("%w: partition %d", ErrReceiptInvalid, p)
	}
	return p, r.String(), nil
}

// receiptOf is the receipt a delivery of cursor i hands out.
func (cs *cursorSet) receiptOf(i int, d queue.Delivery) string {
	return cs.bind.issue(i, d.Offset, d.FencingToken)
}

// leaseFunc is one receipt operation on a cursor: Ack, Extend or Nack.
type leaseFunc func(c *queue.Cursor, now time.Time, receipt string) ([]queue.Event, error)

// lease runs one receipt operation and waits until it is journaled.
func (cs *cursorSet) lease(now func() time.Time, receipt string, op leaseFunc) error {
	if err := cs.lockChecked(); err != nil {
		return err
	}
	evs, err := cs.leaseLocked(now(), receipt, op)
	if err != nil {
		cs.mu.Unlock()
		return err
	}
	done := cs.recordLocked(evs)
	cs.wakeAfterLocked(evs)
	cs.mu.Unlock()
	return cs.wait(done)
}

// leaseBatch runs op for each receipt and journals the lot in one write.
// Each receipt gets its own result (nil, or why it was refused); the error
// is for the set as a whole.
func (cs *cursorSet) leaseBatch(now func() time.Time, receipts []string, op leaseFunc) ([]error, error) {
	results, durable, err := cs.leaseBatchStaged(now, receipts, op)
	if err != nil {
		return nil, err
	}
	return results, durable()
}

// leaseBatchStaged is leaseBatch that returns once the operations are
// applied in memory and submitted to the journal, before the write is
// durable: durable waits for it. Anything the caller submits after this
// returns is journaled after these events, in the same write or a later
// one, and is durable only if they are (the journal refuses everything
// after a failed write until the machine reloads).
func (cs *cursorSet) leaseBatchStaged(now func() time.Time, receipts []string, op leaseFunc) ([]error, func() error, error) {
	if err := cs.lockChecked(); err != nil {
		return nil, nil, err
	}
	t := now()
	results := make([]error, len(receipts))
	var recs []cursorEvent
	for i, r := range receipts {
		evs, err := cs.leaseLocked(t, r, op)
		results[i] = err
		recs = append(recs, evs...)
	}
	done := cs.recordLocked(recs)
	cs.wakeAfterLocked(recs)
	cs.mu.Unlock()
	return results, func() error { return cs.wait(done) }, nil
}

// leaseLocked applies one receipt operation and counts its outcome. Called
// with mu held.
func (cs *cursorSet) leaseLocked(now time.Time, receipt string, op leaseFunc) ([]cursorEvent, error) {
	p, r, err := cs.parseReceipt(receipt)
	if err != nil {
		if errors.Is(err, queue.ErrReceiptStale) {
			cs.ctr.staleRefused++
		}
		return nil, err
	}
	evs, err := op(cs.curs[p], now, r)
	if err != nil {
		if errors.Is(err, queue.ErrReceiptStale) {
			cs.ctr.staleRefused++
		}
		return nil, mapCursorErr(err)
	}
	return onCursor(nil, p, evs), nil
}

// wakeAfterLocked wakes the long-polls if recs may have made a message
// visible: a nack or an extension to now, or where order is kept an ack
// (the group's next message). An ack elsewhere makes nothing visible, and
// waking every waiting consumer for it only had them queue for the lock to
// find nothing. Called with mu held.
func (cs *cursorSet) wakeAfterLocked(recs []cursorEvent) {
	for _, r := range recs {
		if _, ack := r.ev.(queue.Acked); !ack || cs.ordered() {
			cs.notifyLocked()
			return
		}
	}
}

// nextDueLocked is the earliest time a cursor has something come due, or
// zero. Called with mu held.
func (cs *cursorSet) nextDueLocked() time.Time {
	var best time.Time
	for _, c := range cs.curs {
		if d, ok := c.NextDue(); ok && (best.IsZero() || d.Before(best)) {
			best = d
		}
	}
	return best
}

// maintainLocked snapshots an idle set and wakes long-polls whose messages
// came due. Called with mu held.
func (cs *cursorSet) maintainLocked(now time.Time) {
	cs.machine.maintainLocked()
	if due := cs.nextDueLocked(); !due.IsZero() && !due.After(now) {
		cs.notifyLocked()
	}
}

// lose finishes messages of cursor whose records the log no longer holds
// (their batch was damaged and quarantined, see package storage): they can
// be neither delivered nor copied, so they are lost, loudly, and journaled as
// skipped so that no later receive tries them again. QueueStats.Lost counts
// them from storage's quarantine list.
func (cs *cursorSet) lose(cursor int, offs []int64) error {
	cs.mu.Lock()
	var recs []cursorEvent
	for _, off := range offs {
		ev := queue.Skipped{From: off, To: off + 1}
		if err := cs.curs[cursor].Apply(ev); err == nil {
			recs = append(recs, cursorEvent{cursor, ev})
		}
	}
	done := cs.recordLocked(recs)
	cs.wakeAfterLocked(recs) // a FIFO group's next message may be visible now
	cs.mu.Unlock()
	cs.logger.Error("messages lost: their records are in a damaged batch of the log (sluice admin corruption lists it)",
		"cursor", cursor, "offsets", offs)
	return cs.wait(done)
}

// mapCursorErr turns the cursor's argument errors into the broker's.
func mapCursorErr(err error) error {
	if errors.Is(err, queue.ErrOutOfRange) {
		return &InvalidArgumentError{Field: "duration", Reason: err.Error()}
	}
	return err
}
