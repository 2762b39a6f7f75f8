package broker

import (
	"errors"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/storage"
)

// repairAhead runs when a queue or a subscription opens: where a cursor
// knows offsets past the end of the log it reads, that log continues after
// them. logs[i] is the log cursor i reads.
//
// A cursor's journal and snapshot and the log it reads are separate files,
// synced separately. A backup copied file by file while the broker ran, or
// a power cut under --fsync interval or never, can bring back a journal
// that recorded receives and acks of messages the log no longer holds. Left
// alone, the log would give its next appends offsets the cursor has already
// finished or holds in flight: sends acknowledged to their producers and
// never delivered, or delivered under another message's receive count. So
// for each such cursor:
//
//   - every offset in [high watermark, KnownEnd) is finished, journaled as
//     Skipped before anything else changes: the messages there are gone.
//     The ones not finished before (in flight, delayed, never read) are
//     counted lost: an Error log, QueueStats.RecoveredGap and
//     sluice_queue_recovered_gap_messages_total;
//   - the log skips to KnownEnd (storage.Log.SkipTo), keeping every batch
//     below its old end, so no offset is ever given to two messages.
//
// Journal first: a crash between the two leaves a cursor whose finished
// offsets reach past its log, and the next open skips the log again,
// counting nothing twice. A topic's partition log is shared by its
// subscriptions and Kafka consumers; a skip only leaves offsets without
// records, which every reader of a topic already steps over (compaction
// leaves such gaps too).
func (cs *cursorSet) repairAhead(logs []*storage.Log) error {
	type gap struct {
		cursor          int
		hw, known, lost int64
	}
	var gaps []gap
	var recs []cursorEvent
	cs.mu.Lock()
	for i, c := range cs.curs {
		hw, known := logs[i].HighWatermark(), c.KnownEnd()
		if known <= hw {
			continue
		}
		g := gap{i, hw, known, c.Unfinished(hw, known)}
		ev := queue.Skipped{From: hw, To: known}
		if err := c.Apply(ev); err != nil {
			cs.mu.Unlock()
			return err
		}
		cs.ctr.recoveredGap += uint64(g.lost)
		gaps, recs = append(gaps, g), append(recs, cursorEvent{i, ev})
	}
	done := cs.recordLocked(recs)
	cs.mu.Unlock()
	if err := cs.wait(done); err != nil {
		return err
	}
	var errs []error
	for _, g := range gaps {
		errs = append(errs, logs[g.cursor].SkipTo(g.known))
		attrs := []any{"log_end", g.hw, "journal_end", g.known, "messages_lost", g.lost}
		if cs.partitioned {
			attrs = append(attrs, "partition", g.cursor)
		}
		cs.logger.Error("journal is ahead of the log it reads (a file copy taken while running, or a power cut under --fsync interval|never): "+
			"the log goes on after the offsets the journal knows; the messages it lost are gone", attrs...)
	}
	return errors.Join(errs...)
}
