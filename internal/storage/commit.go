package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/linger"
)

// Group commit.
//
// Under SyncAlways an appender validates its batches, then, under wmu,
// assigns offsets and copies them into the pending buffer (no system call),
// kicks the syncer and waits. The syncer, a goroutine owned by the Log,
// takes the pending buffer and the log end under wmu, writes the buffer
// with one write(2), runs one fdatasync, and publishes the new high
// watermark, which wakes every appender whose batches it covered. While one
// group is being written and synced, appenders keep filling the next
// buffer: syncs per second stay at the disk's rate while appends per sync
// grow with the number of concurrent appenders. Before each group the
// syncer may linger (package linger): wait, at most half a sync, for the
// appenders the last group released to come back, so that a producer that
// sends again at once rides the next sync instead of the one after.
//
// A failed fdatasync is final (fsyncgate): the kernel may already have
// dropped the dirty pages, so retrying could report success for lost data.
// The log then fails every waiting and future append with ErrNeedsRecovery
// and keeps serving reads of what was acknowledged; reopening it runs
// recovery, which keeps only whole, checksummed batches.
//
// A failed write (ENOSPC, EIO, short) is not final: the file is cut back to
// where the group started, every batch placed from there on is dropped (its
// appender gets the error), and the log goes on.

// syncerIdle is how long the group-commit syncer of a log waits for an
// append before it exits; the next append starts it again. A log at rest
// then costs no goroutine (about 4 KiB of stack each, which was half the
// memory of 100,000 idle logs).
var syncerIdle = 5 * time.Second

// syncLoop runs syncs on demand (SyncAlways, and SyncNever's SyncAheadBytes)
// or on a ticker (SyncInterval)
// until Close closes l.stop; on demand, it also returns after syncerIdle
// without a kick (ensureSyncer starts it again).
func (l *Log) syncLoop(t *time.Ticker) {
	defer l.bg.Done()
	var tick, idle <-chan time.Time
	var idleT *time.Timer
	if t != nil {
		defer t.Stop()
		tick = t.C
	} else {
		idleT = time.NewTimer(syncerIdle)
		defer idleT.Stop()
		idle = idleT.C
	}
	var pol linger.Policy // group commit only (SyncAlways, no ticker)
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
		case <-tick:
		case <-idle:
			if !l.stayAwake() {
				return
			}
		}
		if t != nil {
			l.syncOnce()
			continue
		}
		// Only SyncAlways's appenders wait for a sync and may come back for
		// the next: SyncNever's syncs ahead (SyncAheadBytes) have nobody to
		// linger for.
		if expect, wait := pol.Next(); wait > 0 && l.opts.Sync.Mode == SyncAlways {
			linger.Wait(expect, wait, l.pendingAppends, l.kick, l.stop)
		}
		began := time.Now()
		appends, _ := l.syncGroup()
		pol.Committed(appends, time.Since(began))
		idleT.Reset(syncerIdle)
	}
}

// stayAwake is the idle syncer's exit: it reports whether a kick raced with
// it going idle and it is still the syncer. An appender kicks before it
// checks that a syncer runs, and the syncer says it stopped before it looks
// for a kick, so between them one always sees the other.
func (l *Log) stayAwake() bool {
	l.syncing.Store(false)
	select {
	case <-l.kick:
		if l.syncing.CompareAndSwap(false, true) {
			return true
		}
		// Another syncer was started meanwhile: the kick is its.
		select {
		case l.kick <- struct{}{}:
		default:
		}
		return false
	default:
		return false
	}
}

// ensureSyncer starts the group-commit syncer if it is not running. Called
// after the kick.
func (l *Log) ensureSyncer() {
	if l.syncing.Load() {
		return
	}
	l.bgMu.Lock()
	defer l.bgMu.Unlock()
	if l.bgStopped || !l.syncing.CompareAndSwap(false, true) {
		return // closing: Close syncs what is pending
	}
	l.bg.Add(1)
	go l.syncLoop(nil)
}

// pendingAppends is how many Append calls wait for the next group commit.
func (l *Log) pendingAppends() int {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.pend.appends
}

// Sync makes everything appended so far durable now, whatever the policy.
func (l *Log) Sync() error {
	if l.closing.Load() {
		return ErrClosed
	}
	return l.syncOnce()
}

// syncOnce writes the pending buffer (SyncAlways), fdatasyncs the active
// segment and publishes the new end. Errors are returned; a failed fdatasync
// is also recorded in l.failed, a failed write is repaired.
func (l *Log) syncOnce() error {
	_, err := l.syncGroup()
	return err
}

// syncGroup is syncOnce, also returning how many Append calls the group
// carried.
func (l *Log) syncGroup() (appends int, err error) {
	l.wmu.Lock()
	l.syncMu.Lock()
	l.repairLocked()
	seg, size, next := l.active, l.active.size.Load(), l.next
	buf, pos, start := l.pend, l.pendPos, l.pendStart
	l.pend = pending{}
	l.wmu.Unlock()
	defer buf.release()
	appends = buf.appends

	if err := l.failure(); err != nil {
		l.syncMu.Unlock()
		return appends, err // never write after a failed sync: recovery decides
	}
	// The file is pinned from the write to its fdatasync: a descriptor the
	// cache closed in between could take a writeback error with it
	// (fsyncgate), and the sync on a new one would report success.
	f, err := seg.log.acquire()
	if err != nil {
		err = fmt.Errorf("storage: append to %s: %w", seg.path(logSuffix), err)
		if buf.size > 0 { // nothing written: the group fails, the log goes on
			l.writeFailed = &writeFailure{err: err, pos: pos, offset: start}
			l.syncMu.Unlock()
			l.repair()
		} else {
			l.syncMu.Unlock()
		}
		return appends, err
	}
	defer seg.log.release()
	if buf.size > 0 {
		if err := l.writeSegment(seg, pos, buf.bufs()...); err != nil {
			l.writeFailed = &writeFailure{err: err, pos: pos, offset: start}
			l.syncMu.Unlock()
			l.repair()
			return appends, err
		}
	}
	defer l.syncMu.Unlock()
	if next <= l.syncedNext {
		return appends, nil // covered by an earlier sync or a roll
	}
	began := time.Now()
	if err := f.Sync(); err != nil {
		err = fmt.Errorf("%w: fdatasync %s: %w", ErrNeedsRecovery, seg.path(logSuffix), err)
		l.fail(err)
		return appends, err
	}
	if o := l.opts.Observer; o != nil {
		o.ObserveFsync(time.Since(began))
		if buf.appends > 0 {
			o.ObserveCommitBatch(buf.appends)
		}
	}
	l.syncedNext = next
	seg.ix.Lock()
	seg.index.flush(size)
	seg.ix.Unlock()
	l.publish(seg, size, next)
	return appends, nil
}

// writeFailure is a group write that failed and was cut back to pos.
type writeFailure struct {
	err    error
	pos    int64 // file position where the failed write started
	offset int64 // offset of its first batch
}

// flushPendingLocked writes the pending buffer to the file, repairing on
// failure. Called with wmu and syncMu held (roll, TruncateSuffix).
func (l *Log) flushPendingLocked() error {
	l.repairLocked()
	if err := l.failure(); err != nil {
		return err
	}
	if l.pend.size == 0 {
		return nil
	}
	err := l.writeSegment(l.active, l.pendPos, l.pend.bufs()...)
	l.pend.release()
	if err != nil {
		l.writeFailed = &writeFailure{err: err, pos: l.pendPos, offset: l.pendStart}
		l.repairLocked()
		return err
	}
	return nil
}

func (l *Log) repair() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.repairLocked()
}

// repairLocked undoes the in-memory effects of a failed group write: every
// batch placed from the failed position on (the failed group and anything
// appended since) is dropped and its appender fails with the write error.
// The file was already cut back. Called with wmu and syncMu held.
func (l *Log) repairLocked() {
	wf := l.writeFailed
	if wf == nil {
		return
	}
	l.writeFailed = nil
	seg := l.active
	l.pend.release()
	seg.size.Store(wf.pos)
	l.next = wf.offset
	seg.ix.Lock()
	_, err := seg.reindexTail(wf.pos)
	seg.ix.Unlock()
	switch {
	case isIOError(err):
		// The index stays conservative (see reindexTail); the data is whole.
		l.opts.Logger.Warn("storage: cannot reread the tail after a failed write; its index is approximate until reopened",
			"segment", seg.path(logSuffix), "err", err)
	case err != nil:
		l.fail(fmt.Errorf("%w: reindex after a failed write: %w", ErrNeedsRecovery, err))
	}
	l.stateMu.Lock()
	l.dropLocked(l.hw.Load(), wf.err)
	l.stateMu.Unlock()
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

// drop records that placed batches at or after offset kept were dropped
// (a failed write, a truncation): appenders waiting on them fail with err.
type drop struct {
	gen  int64 // gen after the drop
	kept int64 // batches ending at or below this offset survived it
	err  error
}

// maxDrops bounds the remembered drops; a waiter older than all of them
// gets ErrTruncated, its outcome unknown.
const maxDrops = 32

// dropLocked increments gen. Called with stateMu held.
func (l *Log) dropLocked(kept int64, err error) {
	l.gen++
	l.drops = append(l.drops, drop{gen: l.gen, kept: kept, err: err})
	if len(l.drops) > maxDrops {
		l.drops = l.drops[len(l.drops)-maxDrops:]
	}
	l.notifyLocked()
}

// droppedLocked reports why batches ending at end, placed at gen, were
// dropped, or nil if they survived every drop since.
func (l *Log) droppedLocked(end, gen int64) error {
	if gen == l.gen {
		return nil
	}
	if len(l.drops) == 0 || l.drops[0].gen > gen+1 {
		return ErrTruncated
	}
	for _, d := range l.drops {
		if d.gen > gen && end > d.kept {
			return d.err
		}
	}
	return nil
}

// waitDurable waits until the high watermark reaches end, the log fails, or
// the batches are dropped. It first waits for its commit group (done), so a
// publish wakes only the appenders it covered.
//
// closeEnds (WaitDurable's waiters, who did not place the batches and have no
// commit group to wait for) also returns ErrClosed once the log is closing, so
// a retry waiting on another request's batch cannot outlive the log; an
// appender's own wait is as it was.
func (l *Log) waitDurable(ctx context.Context, end, gen int64, done chan struct{}, closeEnds bool) error {
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		l.stateMu.Lock()
		hw, ch, failed, dropped := l.hw.Load(), l.hwCh, l.failed, l.droppedLocked(end, gen)
		l.stateMu.Unlock()
		switch {
		case dropped != nil:
			return dropped
		case hw >= end:
			return nil
		case failed != nil:
			return failed
		case closeEnds && l.closing.Load():
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
