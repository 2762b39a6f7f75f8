package broker

import "github.com/sluice-mq/sluice/internal/queue"

// repairAhead runs when a queue opens: if its cursor knows offsets past the
// end of its message log, the log continues after them.
//
// The cursor's journal and snapshot and the message log are separate files,
// synced separately. A backup copied file by file while the broker ran, or a
// power cut under --fsync interval or never, can bring back a journal that
// recorded receives and acks of messages the log no longer holds. Left
// alone, the log would give its next sends offsets the cursor has already
// finished or holds in flight: acknowledged to their producers, never
// delivered (or delivered under another message's state). So:
//
//   - every offset in [high watermark, KnownEnd) is finished (journaled as
//     Skipped, before anything else changes): the messages there are gone,
//     and the ones not yet finished (in flight, delayed, never read) are
//     counted lost, logged and added to QueueStats.RecoveredGap;
//   - the log skips to KnownEnd (storage.Log.SkipTo), keeping every batch
//     below its old end, so no offset is ever given to two messages.
//
// Journal first: a crash between the two leaves a cursor that knows
// finished offsets past the log, and the next open repairs it again,
// counting nothing twice.
func (q *queueRT) repairAhead() error {
	q.mu.Lock()
	hw, known := q.log.HighWatermark(), q.cur().KnownEnd()
	if known <= hw {
		q.mu.Unlock()
		return nil
	}
	lost := q.cur().Unfinished(hw, known)
	ev := queue.Skipped{From: hw, To: known}
	if err := q.cur().Apply(ev); err != nil {
		q.mu.Unlock()
		return err
	}
	q.ctr.recoveredGap += uint64(lost)
	done := q.journalLocked([]queue.Event{ev})
	q.mu.Unlock()
	if err := q.wait(done); err != nil {
		return err
	}
	if err := q.log.SkipTo(known); err != nil {
		return err
	}
	q.b.log.Error("queue journal is ahead of its message log (a live file copy, or a power cut under --fsync interval|never): "+
		"the log goes on after the offsets the journal knows; the messages it lost are gone",
		"queue", q.name, "log_end", hw, "journal_end", known, "messages_lost", lost)
	return nil
}
