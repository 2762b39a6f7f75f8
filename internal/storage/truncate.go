package storage

import (
	"fmt"
	"sort"

	"github.com/sluice-mq/sluice/internal/batch"
)

// TruncateSuffix removes every batch whose last offset is >= offset, so the
// log ends at the base of the batch containing offset (Raft: drop a
// conflicting suffix). Entries are batches, so offset is normally a batch
// base. Appends waiting on removed batches fail with ErrTruncated. The
// result is synced before TruncateSuffix returns.
//
// If offset is below the log start, every segment is removed and the log
// restarts empty at offset.
func (l *Log) TruncateSuffix(offset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate at %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= l.next {
		return nil
	}
	if err := l.flushPendingLocked(); err != nil {
		return err
	}
	var next int64
	for len(l.segs) > 1 && l.segs[len(l.segs)-1].base >= offset {
		s := l.segs[len(l.segs)-1]
		l.segs = l.segs[:len(l.segs)-1]
		if err := s.remove(); err != nil {
			return l.truncateFailed(err)
		}
	}
	// The removals must be durable before the kept segment grows again, or
	// a crash could bring back a removed segment overlapping new data.
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		return l.truncateFailed(err)
	}
	seg := l.segs[len(l.segs)-1]
	var err error
	if offset <= seg.base {
		seg, err = l.restartAt(offset)
		next = offset
	} else {
		next, err = l.truncateSegment(seg, offset)
	}
	if err != nil {
		return l.truncateFailed(err)
	}
	l.active, l.next, l.syncedNext = seg, next, next
	seg.created = l.opts.Now()
	// A cut below a moved start (DeleteRecords, then a replica truncated further back)
	// leaves an empty log there; Open clamps the kept start the same way.
	l.start.Store(min(l.start.Load(), next))
	// Everything kept is synced now (sealed segments were, the kept one
	// was just cut and synced), so the high watermark is the new end:
	// appends that survived the cut are acknowledged.
	l.stateMu.Lock()
	seg.committed.Store(seg.size.Load())
	l.hw.Store(next)
	l.dropLocked(next, ErrTruncated)
	l.stateMu.Unlock()
	return nil
}

// truncateFailed: a half-done truncation leaves files the log cannot vouch
// for until recovery runs again.
func (l *Log) truncateFailed(err error) error {
	err = fmt.Errorf("%w: truncate suffix: %w", ErrNeedsRecovery, err)
	l.fail(err)
	return err
}

// restartAt replaces the only remaining segment by an empty one at offset.
// Called with wmu, syncMu and mu held.
func (l *Log) restartAt(offset int64) (*segment, error) {
	old := l.segs[0]
	if err := old.remove(); err != nil {
		return nil, err
	}
	s, err := createSegment(l.env, offset, l.opts.Now())
	if err != nil {
		l.segs = nil
		return nil, err
	}
	l.segs = []*segment{s}
	if err := l.forgetStart(); err != nil {
		return nil, err
	}
	l.start.Store(offset)
	return s, nil
}

// truncateSegment cuts seg at the batch containing offset, makes it the
// active segment and returns the new log end.
func (l *Log) truncateSegment(seg *segment, offset int64) (int64, error) {
	seg.ix.Lock()
	defer seg.ix.Unlock()
	if err := seg.ensureLoaded(); err != nil {
		return 0, err
	}
	size := seg.size.Load()
	cut, cutBase := size, int64(-1)
	start, rel := seg.index.lookup(offset - seg.base)
	err := seg.walkHeaders(start, seg.base+rel, size, func(p int64, h batch.Header) bool {
		if h.LastOffset() >= offset {
			cut, cutBase = p, h.BaseOffset
			return false
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if err := seg.log.Truncate(cut); err != nil {
		return 0, err
	}
	if err := seg.log.Sync(); err != nil {
		return 0, err
	}
	seg.size.Store(cut)
	seg.q.forget(seg, cut)
	if seg.index.idxFile == nil { // sealed: reopen its indexes, rewritten from memory
		if err := seg.openIndexFiles(0, 0); err != nil {
			return 0, err
		}
	}
	// When nothing in seg is cut, reindexTail finds seg's end, which is the
	// base of the first removed segment (end).
	next, err := seg.reindexTail(cut)
	if err == nil && seg.gapped && next < offset && (cutBase < 0 || cutBase > offset) {
		// offset is in a gap the cleaner left (a Raft checkpoint is a batch
		// boundary of the log as appended): the log ends at offset, not
		// at the last batch kept before it, so what is applied again gets
		// the offsets it had.
		next = offset
	}
	return next, err
}

// reindexTail rebuilds the index state after the last entry below cut by
// scanning the batches from it to cut, as recovery does, and cuts the index
// files to the entries kept. Called with seg.ix held.
func (s *segment) reindexTail(cut int64) (int64, error) {
	x := &s.index
	o := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].pos) >= cut })
	x.offsets = x.offsets[:o]
	start, want := int64(0), s.base
	if o > 0 {
		start, want = int64(x.offsets[o-1].pos), s.base+int64(x.offsets[o-1].rel)
	}
	rel := uint32(want - s.base)
	x.times = x.times[:sort.Search(len(x.times), func(i int) bool { return x.times[i].rel > rel })]
	oldMaxTS := x.maxTS
	x.maxTS, x.maxTSKnown, x.sinceEntry = -1, true, 0
	if len(x.times) > 0 {
		x.maxTS = x.times[len(x.times)-1].ts
	}
	x.offFlushed, x.timeFlushed = min(x.offFlushed, len(x.offsets)), min(x.timeFlushed, len(x.times))
	x.sealTail = false // the truncations below cut it
	res := s.scanRepairing(x, start, want, cut, -1)
	if isIOError(res.err) {
		// The batches could not be read again (the file could not be
		// reopened): keep what was noted before the failure, with the old
		// maximum timestamp (an overestimate, which only keeps the segment
		// longer) and an entry due at the next batch.
		x.maxTS, x.sinceEntry = max(x.maxTS, oldMaxTS), x.interval
		return 0, res.err
	}
	if res.err != nil {
		return 0, res.err
	}
	s.ver.cut(cut, res.next)
	if err := x.idxFile.Truncate(int64(x.offFlushed * offsetEntrySize)); err != nil {
		return 0, err
	}
	if err := x.timeFile.Truncate(int64(x.timeFlushed * timeEntrySize)); err != nil {
		return 0, err
	}
	return res.next, x.syncFiles()
}

// Reset removes every batch and restarts the log empty at offset, which
// may lie anywhere, past the end included: a Raft group that installs a
// snapshot discards its whole log and goes on at the index after the
// snapshot. Appends waiting on removed batches fail with ErrTruncated. The
// result is durable before Reset returns: a crash afterwards never brings
// back a removed segment.
func (l *Log) Reset(offset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: reset at %d", ErrOffsetOutOfRange, offset)
	}
	l.pend.release()
	l.pend = pending{}
	for len(l.segs) > 1 {
		s := l.segs[len(l.segs)-1]
		l.segs = l.segs[:len(l.segs)-1]
		if err := s.remove(); err != nil {
			return l.truncateFailed(err)
		}
	}
	seg, err := l.restartAt(offset)
	if err != nil {
		return l.truncateFailed(err)
	}
	// restartAt removed the last old segment and created the new one: both
	// entries must be durable before anything is appended at offset.
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		return l.truncateFailed(err)
	}
	l.active, l.next, l.syncedNext = seg, offset, offset
	l.stateMu.Lock()
	seg.committed.Store(0)
	l.hw.Store(offset)
	l.dropLocked(offset, ErrTruncated)
	l.stateMu.Unlock()
	return nil
}
