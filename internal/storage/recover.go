package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Recovery of the active segment at Open.
//
//  1. Read its offset and time indexes, keeping the longest valid prefix.
//  2. Walk back from the last offset entry to one whose batch header is
//     there and carries the expected base offset. Entries are written only
//     after the data they point at was synced, so everything before that
//     batch is durable and need not be read.
//  3. Scan forward from it, checking framing, CRC-32C and the offset
//     sequence of each batch, rebuilding index entries as it goes.
//  4. Truncate the file after the last whole, valid batch (a torn write or a
//     write the crash cut short), cut the index files to the entries kept,
//     and sync.
//
// An I/O error while reading is returned, never taken for a torn tail: a
// failing disk must not make the log cut acknowledged data.

// recover prepares the last segment for appends and returns the log end offset.
func (s *segment) recover() (int64, error) {
	s.ix.Lock()
	defer s.ix.Unlock()
	x := &s.index
	size := s.size.Load()
	offs, err := readOffsetIndex(s.fs, s.path(indexSuffix), size)
	if err != nil {
		return 0, fmt.Errorf("storage: recover: %w", err)
	}
	times, err := readTimeIndex(s.fs, s.path(timeIndexSuffix))
	if err != nil {
		return 0, fmt.Errorf("storage: recover: %w", err)
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
	res := s.scanFrom(x, start, want, size)
	if res.err != nil && !isDamage(res.err) {
		return 0, fmt.Errorf("storage: recover %s: %w", s.path(logSuffix), res.err)
	}
	if res.end < size {
		s.logger.Warn("storage: truncating torn tail", "path", s.path(logSuffix),
			"position", res.end, "dropped_bytes", size-res.end, "reason", res.err)
		if err := s.log.Truncate(res.end); err != nil {
			return 0, fmt.Errorf("storage: recover: truncate torn tail: %w", err)
		}
		if err := s.log.Sync(); err != nil {
			return 0, fmt.Errorf("storage: recover: %w", err)
		}
		s.size.Store(res.end)
	}
	s.committed.Store(res.end)
	if err := s.openIndexFiles(len(offs), len(times)); err != nil {
		return 0, err
	}
	return res.next, nil
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
		h, err := s.readHeader(int64(e.pos), size)
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

// isDamage tells bytes that are not a valid batch from an I/O failure.
func isDamage(err error) bool {
	var be *batch.Error
	return errors.Is(err, errTorn) || errors.As(err, &be)
}

// openIndexFiles opens (or creates) the index files of the active segment
// for appending, cut to the entries already on disk that are kept.
func (s *segment) openIndexFiles(offKept, timeKept int) error {
	x := &s.index
	var err error
	if x.idxFile, err = openOrCreate(s.fs, s.path(indexSuffix)); err != nil {
		return err
	}
	if x.timeFile, err = openOrCreate(s.fs, s.path(timeIndexSuffix)); err != nil {
		return err
	}
	x.offFlushed, x.timeFlushed = offKept, timeKept
	if err := x.idxFile.Truncate(int64(offKept * offsetEntrySize)); err != nil {
		return fmt.Errorf("storage: recover index: %w", err)
	}
	if err := x.timeFile.Truncate(int64(timeKept * timeEntrySize)); err != nil {
		return fmt.Errorf("storage: recover index: %w", err)
	}
	return x.syncFiles()
}

func openOrCreate(fsys vfs.FS, path string) (vfs.File, error) {
	f, err := fsys.OpenAppend(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = fsys.Create(path)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return f, nil
}
