package storage

import (
	"fmt"
)

// ApplyRetention deletes whole sealed segments, oldest first: those whose
// newest timestamp is older than Now-RetentionTime, then as many as needed
// to bring the log under RetentionBytes. The active segment is never
// deleted. It returns how many segments it deleted.
func (l *Log) ApplyRetention() (int, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	n := 0
	if rt := l.opts.RetentionTime; rt > 0 {
		cutoff := l.opts.Now().Add(-rt).UnixMilli()
		// A segment without timestamps (-1) is kept: its age is unknown.
		// The timestamp comes from indexes whose seal was checked: a damaged
		// index must not make retention delete a segment early.
		for len(l.segs) > 1 && inRange(l.segs[0].checkedMaxTimestamp(), 0, cutoff) {
			n++
			if err := l.dropFirstLocked(); err != nil {
				return n, err
			}
		}
	}
	if rb := l.opts.RetentionBytes; rb > 0 {
		total := int64(0)
		for _, s := range l.segs {
			total += s.size.Load()
		}
		for len(l.segs) > 1 && total-l.segs[0].size.Load() >= rb {
			total -= l.segs[0].size.Load()
			n++
			if err := l.dropFirstLocked(); err != nil {
				return n, err
			}
		}
	}
	return n, l.syncDirIf(n > 0)
}

// DeleteBelow deletes the sealed segments that hold only offsets below
// offset: the layer above (a queue whose every cursor acked them) says they
// are no longer needed. The log start moves to the first kept segment's base.
func (l *Log) DeleteBelow(offset int64) (int, error) {
	// Nearly every call (the broker's maintenance, every second for every partition)
	// has nothing to delete: say so under the read lock, without taking the writers'.
	l.mu.RLock()
	closed, some := l.closed, len(l.segs) > 1 && l.segs[1].base <= offset
	l.mu.RUnlock()
	if closed {
		return 0, ErrClosed
	}
	if !some {
		return 0, nil
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	n := 0
	for len(l.segs) > 1 && l.segs[1].base <= offset {
		n++
		if err := l.dropFirstLocked(); err != nil {
			return n, err
		}
	}
	return n, l.syncDirIf(n > 0)
}

// dropFirstLocked removes the oldest segment. Called with wmu and mu held.
func (l *Log) dropFirstLocked() error {
	s := l.segs[0]
	l.segs = l.segs[1:]
	l.start.Store(l.startAfterDrop())
	if err := s.remove(); err != nil {
		return fmt.Errorf("storage: delete segment %s: %w", s.path(logSuffix), err)
	}
	return nil
}

// syncDirIf makes deletions durable. A deletion that a crash undoes only
// brings back old data, so this is tidiness, not safety.
func (l *Log) syncDirIf(changed bool) error {
	if !changed {
		return nil
	}
	return l.opts.FS.SyncDir(l.opts.Dir)
}

// inRange reports whether lo <= v < hi.
func inRange(v, lo, hi int64) bool { return v >= lo && v < hi }
