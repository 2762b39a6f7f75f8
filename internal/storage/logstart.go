package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
)

// A log start inside a segment (Kafka's DeleteRecords): the segments hold offsets from
// their first base, but reads, ListOffsets and retention treat the log as starting at the
// moved start. It is kept in startFile (the offset and a CRC-32C of it), written to a
// temporary name, synced and renamed into place, so a crash leaves the old start or the
// new one. A start at or below the first segment's base says nothing and is not kept.

const (
	startFile = "start.offset"
	startTmp  = "start.offset.tmp"
)

// MoveStart moves the log start up to offset, at most the high watermark (Kafka's
// DeleteRecords: offset -1 there means the high watermark, the caller's to resolve).
// Reads below it fail with ErrOffsetOutOfRange from then on, and the sealed segments that
// hold only offsets below it are deleted. The new start is durable before MoveStart
// returns; it returns the log start after the call (an offset at or below the current
// start changes nothing).
func (l *Log) MoveStart(offset int64) (int64, error) { return l.moveStart(offset, true) }

// RaiseStart is MoveStart kept in memory: reads, ListOffsets and retention see the log
// start at offset at once, but it is written, and the segments below it deleted, only by
// PersistStartUpTo, so a crash before that brings the old start back with every record.
// A replicated partition's DeleteRecords uses it: after a crash its replica applies the
// Raft entries after its last checkpoint again, the DeleteRecords among them, and the
// entries before that one must find the records they found the first time.
func (l *Log) RaiseStart(offset int64) (int64, error) { return l.moveStart(offset, false) }

func (l *Log) moveStart(offset int64, durable bool) (int64, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	cur, hw := l.start.Load(), l.hw.Load()
	if offset > hw || offset < 0 {
		return cur, fmt.Errorf("%w: move the log start to %d, log has [%d, %d)", ErrOffsetOutOfRange, offset, cur, hw)
	}
	if offset <= cur {
		return cur, nil
	}
	if !durable {
		l.moved, l.startDirty = offset, true
		l.start.Store(offset)
		return offset, nil
	}
	if err := l.writeStart(offset); err != nil {
		return cur, fmt.Errorf("storage: keep the log start: %w", err)
	}
	l.start.Store(offset)
	return offset, l.dropBelowLocked(offset)
}

// PersistStartUpTo makes the start RaiseStart moved durable, but no further than offset,
// and deletes the sealed segments below what it kept (nothing to do if no start was
// raised since; math.MaxInt64: all of it). A replicated partition calls it with the start
// its last stored snapshot's checkpoint names: a start raised after that checkpoint stays
// in memory until the next, for a replica that crashes restores the checkpoint and
// applies the entries after it again, which must find the records the first time found.
// A start already kept is never lowered.
func (l *Log) PersistStartUpTo(offset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if !l.startDirty {
		return nil
	}
	raised := l.moved
	to := min(raised, offset)
	if to <= l.kept {
		return nil
	}
	if err := l.writeStart(to); err != nil {
		return fmt.Errorf("storage: keep the log start: %w", err)
	}
	l.moved, l.startDirty = raised, to < raised
	return l.dropBelowLocked(to)
}

// writableLocked refuses a change to a log that is closing, closed or failed.
// Called with mu held.
func (l *Log) writableLocked() error {
	if l.closed || l.closing.Load() {
		return ErrClosed
	}
	return l.failure()
}

// dropBelowLocked deletes the sealed segments that hold only offsets below offset.
// Called with wmu and mu held.
func (l *Log) dropBelowLocked(offset int64) error {
	n := 0
	for len(l.segs) > 1 && l.segs[1].base <= offset {
		n++
		if err := l.dropFirstLocked(); err != nil {
			return err
		}
	}
	return l.syncDirIf(n > 0)
}

// startAfterDrop is the log start once the first segment is base: that base, or the moved
// start when it lies inside that segment. Called with mu held.
func (l *Log) startAfterDrop() int64 {
	return max(l.segs[0].base, l.moved)
}

// writeStart makes offset the kept start. Called with wmu and mu held.
func (l *Log) writeStart(offset int64) error {
	fsys, dir := l.opts.FS, l.opts.Dir
	tmp := filepath.Join(dir, startTmp)
	f, err := l.opts.Files.create(fsys, tmp)
	if err != nil {
		return err
	}
	b := binary.BigEndian.AppendUint64(nil, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	f.drop()
	if err == nil {
		err = fsys.Rename(tmp, filepath.Join(dir, startFile))
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	l.moved, l.kept = offset, offset
	return nil
}

// forgetStart removes the kept start: the log restarts somewhere else (Reset). Called
// with wmu and mu held.
func (l *Log) forgetStart() error {
	l.moved, l.kept, l.startDirty = 0, 0, false
	err := l.opts.FS.Remove(filepath.Join(l.opts.Dir, startFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// readStart loads the kept start at open, if any: a file that is torn or fails its CRC
// is refused (the start it held is unknown; a start lower than it would serve records a
// DeleteRecords answered as deleted).
func (l *Log) readStart() error {
	fsys, dir := l.opts.FS, l.opts.Dir
	_ = fsys.Remove(filepath.Join(dir, startTmp)) // a write a crash cut short
	b, err := readAll(l.opts.Files, fsys, filepath.Join(dir, startFile))
	if err != nil {
		return fmt.Errorf("storage: read %s: %w", startFile, err)
	}
	if b == nil {
		return nil // none kept
	}
	if len(b) != 12 || crc32.Checksum(b[:8], castagnoli) != binary.BigEndian.Uint32(b[8:]) {
		return &CorruptionError{Path: filepath.Join(dir, startFile), Offset: -1, Position: -1,
			Err: errors.New("the kept log start (DeleteRecords) is damaged")}
	}
	l.moved = int64(binary.BigEndian.Uint64(b[:8]))
	l.kept = l.moved
	return nil
}
