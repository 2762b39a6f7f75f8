package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/queue"
)

// What a share group does to its subscription's cursors: acquire from one
// partition, settle acquired records by receipt, and fetch the batches that
// hold them. The acquisition lock is the cursor's visibility, the delivery
// count its receive count; accept is an ack, release a nack, renew an
// extension, and archiving (reject, or the delivery limit) an ack or, with
// a dead-letter queue, a dead letter.

// acquirePart acquires up to max records of partition p for lock. Records
// already delivered more than limit times are archived instead (their lock
// ran out at the limit), to dlq if set.
func (sub *subRT) acquirePart(ctx context.Context, p, max int, lock time.Duration, limit int, dlq string) ([]queue.Delivery, error) {
	if err := sub.lockChecked(); err != nil {
		return nil, err
	}
	if p < 0 || p >= len(sub.curs) {
		sub.mu.Unlock()
		return nil, nil
	}
	now := sub.t.s.b.now()
	evs, err := sub.fillLocked(p, now)
	var ds []queue.Delivery
	if err == nil {
		var more []queue.Event
		ds, more, err = sub.curs[p].Receive(now, max, lock)
		evs = append(evs, more...)
	}
	recs, dead := splitDeadLetters(onCursor(nil, p, evs))
	done := sub.recordLocked(recs)
	parts, source := sub.parts, subKey(sub.t.name, sub.settings.Name)
	target := sub.settings.DeadLetterQueue
	sub.mu.Unlock()
	err = errors.Join(mapCursorErr(err), sub.wait(done))
	if err == nil && len(dead) > 0 { // the subscription's own receive limit (set natively)
		err = sub.deadLetter(ctx, sub.t.s.b, target, dead, sub.deadLetterCopies(parts, source))
	}
	if err != nil {
		return nil, fmt.Errorf("share fetch from %s: %w", source, err)
	}
	var keep []queue.Delivery
	var over []string
	for _, d := range ds {
		if d.ReceiveCount > limit {
			over = append(over, sub.receiptOf(p, d))
			continue
		}
		keep = append(keep, d)
	}
	if len(over) > 0 {
		if _, err := sub.archive(ctx, over, dlq, "delivery count limit reached (lock timed out)"); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// archive finishes deliveries for good: acked, or dead-lettered to dlq.
// Each receipt gets its own result.
func (sub *subRT) archive(ctx context.Context, receipts []string, dlq, reason string) ([]error, error) {
	b := sub.t.s.b
	if dlq == "" {
		return sub.leaseBatch(b.now, receipts, ackLease)
	}
	if err := sub.lockChecked(); err != nil {
		return nil, err
	}
	now := b.now()
	results := make([]error, len(receipts))
	var recs []cursorEvent
	op := func(c *queue.Cursor, now time.Time, r string) ([]queue.Event, error) {
		return c.DeadLetter(now, r, reason)
	}
	for i, r := range receipts {
		evs, err := sub.leaseLocked(now, r, op)
		results[i] = err
		recs = append(recs, evs...)
	}
	_, dead := splitDeadLetters(recs)
	parts, source := sub.parts, subKey(sub.t.name, sub.settings.Name)
	sub.mu.Unlock()
	if len(dead) == 0 {
		return results, nil
	}
	return results, sub.deadLetter(ctx, b, dlq, dead, sub.deadLetterCopies(parts, source))
}

// shareBatches reads the log batches of partition p that hold any of offs
// (sorted ascending), whole, as a Fetch returns them: the client keeps the
// acquired records of each batch and skips the others.
func shareBatches(p *partitionRT, offs []int64) ([]byte, error) {
	if len(offs) == 0 {
		return nil, nil
	}
	var out []byte
	i, pos := 0, offs[0]
	for i < len(offs) {
		data, err := p.log.Read(pos, fillReadBytes)
		if err != nil {
			return nil, fmt.Errorf("read batches at %d: %w", pos, err)
		}
		if len(data) == 0 {
			break
		}
		for len(data) > 0 && i < len(offs) {
			n, err := batch.FrameSize(data)
			if err != nil || int64(len(data)) < n {
				return nil, fmt.Errorf("read batches at %d: bad framing", pos)
			}
			h, err := batch.ParseHeader(data[:n])
			if err != nil {
				return nil, err
			}
			for i < len(offs) && offs[i] < h.BaseOffset {
				i++ // in no batch (damaged and quarantined): the client acks it as a gap
			}
			if i < len(offs) && offs[i] <= h.LastOffset() {
				out = append(out, data[:n]...)
				for i < len(offs) && offs[i] <= h.LastOffset() {
					i++
				}
			}
			pos = h.NextOffset()
			data = data[n:]
		}
		if i < len(offs) && offs[i] > pos {
			pos = offs[i]
		}
	}
	return out, nil
}
