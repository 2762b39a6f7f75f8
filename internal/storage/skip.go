package storage

import (
	"fmt"
	"math"
)

// SkipTo moves the end of the log forward to offset, which holds no batch
// in between: the next append gets offset. Every batch below the old end is
// kept. A queue uses it when its cursor's journal knows offsets its log lost
// (the journal outlived the log: a file copy taken while running, a power
// cut under a policy that syncs the two independently), so that new
// messages get offsets the cursor has not already finished.
//
// The active segment is sealed and synced and a new one starts at offset,
// as a roll does, so the gap lies between two segments, which is where a
// reader already steps over offsets without batches. The result is durable
// before SkipTo returns. An offset at or below the end is a no-op.
func (l *Log) SkipTo(offset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closing.Load() {
		return ErrClosed
	}
	if err := l.failure(); err != nil {
		return err
	}
	if offset <= l.next {
		return nil
	}
	if offset-l.active.base > math.MaxInt32 {
		// The seal's relative end would overflow: only a corrupt journal
		// claims offsets that far ahead.
		return fmt.Errorf("%w: skip from %d to %d", ErrOffsetOutOfRange, l.next, offset)
	}
	if err := l.rollTo(offset); err != nil {
		return err
	}
	l.syncMu.Lock()
	l.next, l.syncedNext = offset, offset
	l.syncMu.Unlock()
	l.publish(l.active, 0, offset)
	return nil
}
