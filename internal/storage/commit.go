package storage

import (
	"context"
	"fmt"
	"time"
)

// Group commit.
//
// Appenders write their batches into the file under wmu (a write(2) each,
// no sync), then kick the syncer and wait. The syncer, a goroutine owned by
// the Log, takes a snapshot of the log end, runs one fdatasync, and publishes
// the snapshot as the new high watermark, which wakes every appender whose
// data it covered. While one fdatasync runs, new appenders keep writing, and
// the next fdatasync covers all of them: the number of syncs per second stays
// at the disk's rate while the number of appends per sync grows with the
// number of concurrent appenders.
//
// A failed fdatasync is final (fsyncgate): the kernel may already have
// dropped the dirty pages, so retrying could report success for lost data.
// The log then fails every waiting and future append with ErrNeedsRecovery
// and keeps serving reads of what was acknowledged; reopening it runs
// recovery, which keeps only whole, checksummed batches.

// syncLoop runs syncs on demand (SyncAlways) or on a ticker (SyncInterval)
// until Close closes l.stop.
func (l *Log) syncLoop(t *time.Ticker) {
	defer close(l.bgDone)
	var tick <-chan time.Time
	if t != nil {
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
		case <-tick:
		}
		l.syncOnce()
	}
}

// Sync makes everything appended so far durable now, whatever the policy.
func (l *Log) Sync() error {
	if l.closing.Load() {
		return ErrClosed
	}
	return l.syncOnce()
}

// syncOnce fdatasyncs the active segment up to the current end and
// publishes it. Errors are recorded in l.failed and returned.
func (l *Log) syncOnce() error {
	l.wmu.Lock()
	seg, size, next := l.active, l.active.size.Load(), l.next
	l.wmu.Unlock()

	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.failure(); err != nil {
		return err
	}
	if next <= l.syncedNext {
		return nil // covered by an earlier sync or a roll
	}
	if seg.deleted.Load() || seg.size.Load() < size {
		return nil // truncated under us; the truncation synced
	}
	if err := seg.log.Sync(); err != nil {
		err = fmt.Errorf("%w: fdatasync %s: %w", ErrNeedsRecovery, seg.path(logSuffix), err)
		l.fail(err)
		return err
	}
	l.syncedNext = next
	seg.ix.Lock()
	seg.index.flush(size)
	seg.ix.Unlock()
	l.publish(seg, size, next)
	return nil
}

// publish makes batches below next (ending at byte size of seg) visible to
// readers and wakes waiters. It never moves the high watermark back.
func (l *Log) publish(seg *segment, size, next int64) {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if next <= l.hw.Load() {
		return
	}
	// committed before hw: a reader that sees the new hw sees the bytes.
	seg.committed.Store(size)
	l.hw.Store(next)
	l.notifyLocked()
}

// notifyLocked wakes everyone waiting on hwCh. Called with stateMu held.
func (l *Log) notifyLocked() {
	close(l.hwCh)
	l.hwCh = make(chan struct{})
}

// fail records the first fatal error and wakes waiters so they see it.
func (l *Log) fail(err error) {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if l.failed == nil {
		l.failed = err
		l.opts.Logger.Error("storage: log failed; appends refused until reopened", "dir", l.opts.Dir, "err", err)
	}
	l.notifyLocked()
}

func (l *Log) failure() error {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	return l.failed
}

// waitDurable waits until the high watermark reaches end, the log fails, or
// a truncation removes the batches (gen changed).
func (l *Log) waitDurable(ctx context.Context, end, gen int64) error {
	for {
		l.stateMu.Lock()
		hw, ch, failed, g := l.hw.Load(), l.hwCh, l.failed, l.gen
		l.stateMu.Unlock()
		switch {
		case g != gen:
			return ErrTruncated
		case hw >= end:
			return nil
		case failed != nil:
			return failed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
