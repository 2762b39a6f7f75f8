package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// Recovery of the active segment at Open.
//
//  1. Read its offset and time indexes. If they end with a seal trailer
//     (the log was closed cleanly) that matches, they are whole and the
//     final time entry says where the data synced at that close ended; if
//     the trailer does not match, nothing in them is used. Otherwise (a
//     crash) keep the longest valid prefix.
//  2. Walk back from the last offset entry to one whose batch header is
//     there and carries the expected base offset. Entries are written only
//     after the data they point at was synced, so everything before that
//     batch is durable and need not be read.
//  3. Scan forward from it, checking framing, CRC-32C and the offset
//     sequence of each batch, rebuilding index entries as it goes.
//  4. At a batch that is not valid, look for the next valid batch after it
//     (resync, damage.go). If there is one, the bytes between are damage in
//     the middle, not a write cut short at the end: quarantine them and go
//     on from it. If there is none, the bytes from the bad batch to the end
//     are a torn tail, cut off, unless they start at or before the durable
//     mark: the position of the last offset entry on disk, or the end the
//     last clean close recorded. Such bytes had been synced, so they are
//     damage, quarantined, and the log goes on after them with offsets that
//     cannot collide with any they held.
//  5. Truncate a torn tail, cut the index files to the entries kept, and
//     sync.
//
// An I/O error while reading is returned, never taken for a torn tail: a
// failing disk must not make the log cut acknowledged data.

// durableMark is what the index files say was synced before the crash.
type durableMark struct {
	pos  int64 // a batch starts here and was synced (-1: unknown)
	next int64 // every offset below was synced (-1: unknown)
	// The entries in the files, final time entry included, when they are
	// the whole seal of a clean close (-1 otherwise).
	offs, times int
}

// recover prepares the last segment for appends and returns the log end offset.
func (s *segment) recover() (int64, error) {
	s.ix.Lock()
	defer s.ix.Unlock()
	x := &s.index
	size := s.size.Load()
	offs, times, mark, err := s.readRecoveryIndex(size)
	if err != nil {
		return 0, err
	}
	offs, times, err = s.recoveryStart(offs, times, size)
	if err != nil {
		return 0, err
	}
	start, want := int64(0), s.base
	if len(offs) > 0 {
		e := offs[len(offs)-1]
		start, want = int64(e.pos), s.base+int64(e.rel)
	}
	*x = segIndex{loaded: true, offsets: offs, times: times, maxTS: -1, maxTSKnown: true, interval: s.interval}
	if len(times) > 0 {
		x.maxTS = times[len(times)-1].ts
	}
	end, next, err := s.scanTail(x, start, want, size, mark)
	if err != nil {
		return 0, err
	}
	if end < size {
		s.logger.Warn("storage: truncating torn tail", "path", s.path(logSuffix),
			"position", end, "dropped_bytes", size-end)
		if err := s.log.Truncate(end); err != nil {
			return 0, fmt.Errorf("storage: recover: truncate torn tail: %w", err)
		}
		if err := s.log.Sync(); err != nil {
			return 0, fmt.Errorf("storage: recover: %w", err)
		}
		s.size.Store(end)
		s.q.forget(s, end)
	}
	s.committed.Store(end)
	s.ver.reset(start, want)
	if end == size && next == mark.next && len(offs) == mark.offs && len(times) == mark.times-1 &&
		len(x.offsets) == len(offs) && len(x.times) == len(times) {
		// Exactly as the last clean close left it: the index files stay as
		// they are (no cut, no sync); the first append cuts the seal.
		s.attachIndexFiles(len(offs), len(times))
		x.sealTail, s.cleanEnd = true, next
		return next, nil
	}
	if err := s.openIndexFiles(len(offs), len(times)); err != nil {
		return 0, err
	}
	return next, nil
}

// readRecoveryIndex reads the active segment's index files (step 1).
func (s *segment) readRecoveryIndex(size int64) ([]offsetEntry, []timeEntry, durableMark, error) {
	mark := durableMark{pos: -1, next: -1, offs: -1, times: -1}
	idx, err := readAll(s.files, s.fs, s.path(indexSuffix))
	if err != nil {
		return nil, nil, mark, fmt.Errorf("storage: recover: %w", err)
	}
	tidx, err := readAll(s.files, s.fs, s.path(timeIndexSuffix))
	if err != nil {
		return nil, nil, mark, fmt.Errorf("storage: recover: %w", err)
	}
	entries, crc, sealed := splitTrailer(tidx)
	if sealed && (len(idx)%offsetEntrySize != 0 || sealCRC(idx, entries) != crc) {
		s.logger.Warn("storage: index of the active segment does not match its seal; rebuilding it from the segment",
			"segment", s.path(logSuffix))
		return nil, nil, mark, nil
	}
	offs, times := parseOffsetIndex(idx, size), parseTimeIndex(entries)
	if sealed && len(times) > 0 {
		mark.next = s.base + int64(times[len(times)-1].rel)
		if len(offs)*offsetEntrySize == len(idx) && len(times)*timeEntrySize == len(entries) {
			mark.offs, mark.times = len(offs), len(times)
		}
	}
	if len(offs) > 0 {
		mark.pos = int64(offs[len(offs)-1].pos)
	}
	return offs, times, mark, nil
}

// scanTail scans the active segment from start to size (steps 3 and 4) and
// returns where its good data ends and the log end offset.
func (s *segment) scanTail(x *segIndex, start, want, size int64, mark durableMark) (end, next int64, err error) {
	pos := start
	for {
		res := s.scanFrom(x, pos, want, size, 0)
		ce, dmg := asDamage(res.err)
		if res.err != nil && !dmg {
			return 0, 0, fmt.Errorf("storage: recover %s: %w", s.path(logSuffix), res.err)
		}
		if !dmg {
			return res.end, res.next, nil
		}
		if mark.next >= 0 && ce.want >= mark.next {
			// Past where the last clean close ended the data: nothing there
			// was ever written as a batch (the first append after an Open
			// cuts that record off, durably, before it writes), so however
			// it looks it is a torn tail.
			return ce.Position, ce.want, nil
		}
		q, h, found, err := s.resync(ce.Position, ce.want, size)
		if err != nil {
			return 0, 0, fmt.Errorf("storage: recover %s: %w", s.path(logSuffix), err)
		}
		if found {
			s.q.add(s, qrange{pos: ce.Position, end: q, first: ce.want, last: h.BaseOffset - 1}, ce.Err.Error())
			pos, want = q, h.BaseOffset
			continue
		}
		if ce.Position > mark.pos && ce.want >= mark.next {
			return ce.Position, ce.want, nil // a torn tail
		}
		// Synced bytes that are damaged to the end. A clean close recorded
		// where the data ended, and nothing was appended since (the first
		// append after an Open cuts that record off first): those offsets
		// are skipped. Without it, every offset the bytes can hold (one per
		// byte at most) is skipped, so that none is ever reused.
		last := ce.want + (size - ce.Position) - 1
		if mark.next > ce.want {
			last = mark.next - 1
		}
		s.q.add(s, qrange{pos: ce.Position, end: size, first: ce.want, last: last}, ce.Err.Error())
		return size, last + 1, nil
	}
}

// pairedTimes returns how many leading time entries were written with an
// offset entry of the same relative offset, as note writes them. A torn
// index write that garbled an entry's offset ends the kept prefix; a garbled
// smaller timestamp already did (timestamps may not decrease).
func pairedTimes(times []timeEntry, offs []offsetEntry) int {
	j := 0
	for i, t := range times {
		for j < len(offs) && offs[j].rel < t.rel {
			j++
		}
		if j == len(offs) || offs[j].rel != t.rel {
			return i
		}
	}
	return len(times)
}

// recoveryStart keeps the index entries recovery can trust and returns them;
// the scan starts at the last offset entry kept (or at 0). That entry must
// point at a batch with the expected base offset, and must have its time
// entry, which holds the segment's maximum timestamp before it: the scan
// does not read what lies before it.
func (s *segment) recoveryStart(offs []offsetEntry, times []timeEntry, size int64) ([]offsetEntry, []timeEntry, error) {
	for len(offs) > 0 {
		e := offs[len(offs)-1]
		h, err := s.readHeader(int64(e.pos), s.base+int64(e.rel), size)
		if err == nil && h.BaseOffset == s.base+int64(e.rel) {
			break
		}
		var ce *CorruptionError
		if err != nil && !errors.As(err, &ce) {
			return nil, nil, fmt.Errorf("storage: recover: %w", err)
		}
		offs = offs[:len(offs)-1]
	}
	last := uint32(0)
	if len(offs) > 0 {
		last = offs[len(offs)-1].rel
	}
	times = times[:sort.Search(len(times), func(i int) bool { return times[i].rel > last })]
	times = times[:pairedTimes(times, offs)]
	// Walk back to the entry whose time entry survived (both files lose
	// their unsynced tails independently). With no time entry at all the
	// scan covers the whole segment (batches without timestamps, or a lost
	// time index).
	for len(offs) > 0 && (len(times) == 0 || offs[len(offs)-1].rel != times[len(times)-1].rel) {
		offs = offs[:len(offs)-1]
	}
	return offs, times, nil
}

// attachIndexFiles names the existing index files of the active segment,
// whose first offKept and timeKept entries are those in memory, without
// opening them.
func (s *segment) attachIndexFiles(offKept, timeKept int) {
	x := &s.index
	x.idxFile = s.files.handle(s.fs, s.path(indexSuffix))
	x.timeFile = s.files.handle(s.fs, s.path(timeIndexSuffix))
	x.offFlushed, x.timeFlushed = offKept, timeKept
}

// openIndexFiles opens (or creates) the index files of the active segment
// for appending, cut to the entries already on disk that are kept.
func (s *segment) openIndexFiles(offKept, timeKept int) error {
	x := &s.index
	idx, err := openOrCreate(s.files, s.fs, s.path(indexSuffix))
	if err != nil {
		return err
	}
	x.idxFile = idx
	tidx, err := openOrCreate(s.files, s.fs, s.path(timeIndexSuffix))
	if err != nil {
		return err
	}
	x.timeFile = tidx
	x.offFlushed, x.timeFlushed = offKept, timeKept
	if err := x.idxFile.Truncate(int64(offKept * offsetEntrySize)); err != nil {
		return fmt.Errorf("storage: recover index: %w", err)
	}
	if err := x.timeFile.Truncate(int64(timeKept * timeEntrySize)); err != nil {
		return fmt.Errorf("storage: recover index: %w", err)
	}
	return x.syncFiles()
}

func openOrCreate(files *FileCache, fsys vfs.FS, path string) (*cachedFile, error) {
	_, err := fsys.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		var h *cachedFile
		if h, err = files.create(fsys, path); err == nil {
			return h, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return files.handle(fsys, path), nil
}
