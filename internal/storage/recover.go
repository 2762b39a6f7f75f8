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
	start, want := int64(0), s.base
	for len(offs) > 0 {
		e := offs[len(offs)-1]
		h, err := s.readHeader(int64(e.pos), size)
		if err == nil && h.BaseOffset == s.base+int64(e.rel) {
			start, want = int64(e.pos), h.BaseOffset
			break
		}
		var ce *CorruptionError
		if err != nil && !errors.As(err, &ce) {
			return 0, fmt.Errorf("storage: recover: %w", err)
		}
		offs = offs[:len(offs)-1]
	}
	rel := uint32(want - s.base)
	times = times[:sort.Search(len(times), func(i int) bool { return times[i].rel > rel })]
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
