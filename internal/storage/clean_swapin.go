package storage

import (
	"fmt"
)

// swapIn replaces the run g with the segment a cleanWriter finished at
// base (under temporary names): it commits the swap, then, holding wmu
// (no roll, truncation or retention meanwhile) and mu (no reader between
// the renames and the new segment list), renames and deletes the files
// and installs the new segment. A reader that took an old segment's file
// before (a sendfile in flight) keeps its descriptor, and so the old
// bytes, until it is done. A failure after the commit leaves the log
// failed (ErrNeedsRecovery): the next Open finishes the swap.
func (l *Log) swapIn(g []cleanSeg, base int64, mi markerInfo) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	i, err := l.findRun(g)
	if err != nil {
		return err
	}
	st := swapState{base: base}
	for _, cs := range g[1:] {
		st.removed = append(st.removed, cs.base)
	}
	fs, dir := l.opts.FS, l.opts.Dir
	if err := fs.SyncDir(dir); err != nil { // the .swap files' names
		return fmt.Errorf("storage: clean: %w", err)
	}
	if maybe, err := commitSwap(fs, dir, st); err != nil {
		if !maybe {
			return fmt.Errorf("storage: clean: %w", err) // nothing committed: the caller drops the .swap files
		}
		// cleaner.swap may or may not be durable: only Open can tell.
		l.fail(fmt.Errorf("%w: commit of a clean: %w", ErrNeedsRecovery, err))
		return l.failure()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, cs := range g {
		cs.s.deleted.Store(true)
		cs.s.close()
		l.env.q.forget(cs.s, 0)
	}
	if err := finishSwap(fs, dir, st); err != nil {
		l.fail(fmt.Errorf("%w: %w", ErrNeedsRecovery, err))
		return l.failure()
	}
	ns, err := openSegment(l.env, base, l.opts.Now())
	if err != nil {
		l.fail(fmt.Errorf("%w: reopen cleaned segment: %w", ErrNeedsRecovery, err))
		return l.failure()
	}
	ns.sealedNext = g[len(g)-1].end
	ns.gapped, ns.mark = true, mi
	if ts, ok := readLastTime(l.opts.Files, fs, ns.path(timeIndexSuffix), ns.sealedNext-ns.base); ok {
		ns.index.maxTS, ns.index.maxTSKnown = ts, true
	}
	segs := append([]*segment{}, l.segs[:i]...)
	segs = append(segs, ns)
	l.segs = append(segs, l.segs[i+len(g):]...)
	return nil
}

// findRun returns where the run g still sits in l.segs, the same segment
// objects, sealed, with the same ends; errCleanRaced if anything moved.
// Called with wmu held.
func (l *Log) findRun(g []cleanSeg) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	if err := l.failure(); err != nil {
		return 0, err // the log waits for a reopen's recovery: change nothing before it
	}
	for i, s := range l.segs {
		if s != g[0].s {
			continue
		}
		if i+len(g) >= len(l.segs) {
			return 0, errCleanRaced // the run reaches the active segment
		}
		for j, cs := range g {
			if l.segs[i+j] != cs.s || cs.s.sealedNext != cs.end || cs.s.size.Load() != cs.size {
				return 0, errCleanRaced
			}
		}
		return i, nil
	}
	return 0, errCleanRaced
}
