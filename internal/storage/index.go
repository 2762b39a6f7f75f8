package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// Index entry sizes on disk (big-endian).
const (
	offsetEntrySize = 8  // relativeOffset uint32 | position uint32
	timeEntrySize   = 12 // timestamp int64 | relativeOffset uint32
)

// offsetEntry says the batch whose base offset is base+rel starts at pos.
type offsetEntry struct{ rel, pos uint32 }

// timeEntry says every batch before base+rel has maxTimestamp <= ts.
// pos (memory only) is where batch base+rel starts, to know when the entry
// points at synced data and may be written to the file.
type timeEntry struct {
	ts  int64
	rel uint32
	pos int64
}

// segIndex is a segment's sparse offset and time indexes. It is always in
// memory for the active segment; for a sealed one it is loaded on first use.
// Guarded by segment.ix.
type segIndex struct {
	loaded  bool
	offsets []offsetEntry
	times   []timeEntry

	// Files of the active segment, nil once sealed. Entries are written
	// only after the data they point at is synced, so after a crash every
	// entry on disk points at durable data and recovery may start at the
	// last one.
	idxFile, timeFile       vfs.File
	offFlushed, timeFlushed int
	sinceEntry              int64 // bytes appended since the last offset entry
	maxTS                   int64 // newest maxTimestamp in the segment; -1: none
	maxTSKnown              bool
	interval                int64
	broken                  bool // an index write failed: files removed, rebuilt at next open
}

// note records a batch just appended at pos, adding index entries every
// interval bytes. The time entry carries the maximum *before* this batch.
func (x *segIndex) note(rel uint32, pos, size, maxTS int64) {
	if pos > 0 && x.sinceEntry >= x.interval {
		x.offsets = append(x.offsets, offsetEntry{rel: rel, pos: uint32(pos)})
		// Every offset entry gets its time entry, even if the maximum did
		// not grow: recovery then knows the segment's maximum before any
		// batch it starts scanning from.
		if x.maxTS >= 0 {
			x.times = append(x.times, timeEntry{ts: x.maxTS, rel: rel, pos: pos})
		}
		x.sinceEntry = 0
	}
	x.sinceEntry += size
	x.maxTS = max(x.maxTS, maxTS)
	x.maxTSKnown = true
}

// lookup returns the position of the last indexed batch with base <= base+rel.
func (x *segIndex) lookup(rel int64) int64 {
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].rel) > rel })
	if i == 0 {
		return 0
	}
	return int64(x.offsets[i-1].pos)
}

// lastEntryBefore returns the greatest indexed position <= pos.
func (x *segIndex) lastEntryBefore(pos int64) int64 {
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].pos) > pos })
	if i == 0 {
		return 0
	}
	return int64(x.offsets[i-1].pos)
}

// timeLookup returns the relative offset where a search for ts can start:
// every batch before it has maxTimestamp < ts.
func (x *segIndex) timeLookup(ts int64) int64 {
	i := sort.Search(len(x.times), func(i int) bool { return x.times[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return int64(x.times[i-1].rel)
}

// flush writes the entries pointing below synced to the index files.
func (x *segIndex) flush(synced int64) {
	if x.idxFile == nil || x.broken {
		return
	}
	var buf []byte
	n := x.offFlushed
	for ; n < len(x.offsets) && int64(x.offsets[n].pos) < synced; n++ {
		buf = binary.BigEndian.AppendUint32(buf, x.offsets[n].rel)
		buf = binary.BigEndian.AppendUint32(buf, x.offsets[n].pos)
	}
	if len(buf) > 0 {
		if !x.write(x.idxFile, buf, x.offFlushed*offsetEntrySize) {
			return
		}
		x.offFlushed = n
	}
	buf = buf[:0]
	n = x.timeFlushed
	for ; n < len(x.times) && x.times[n].pos < synced; n++ {
		buf = binary.BigEndian.AppendUint64(buf, uint64(x.times[n].ts))
		buf = binary.BigEndian.AppendUint32(buf, x.times[n].rel)
	}
	if len(buf) > 0 && x.write(x.timeFile, buf, x.timeFlushed*timeEntrySize) {
		x.timeFlushed = n
	}
}

// write appends entries; on failure it cuts the file back to whole entries,
// and if even that fails, gives up on the files until the next Open, which
// rebuilds what is missing from the log. The index is an accelerator: losing
// it never loses data.
func (x *segIndex) write(f vfs.File, buf []byte, good int) bool {
	if _, err := f.Write(buf); err != nil {
		if f.Truncate(int64(good)) != nil {
			x.broken = true
		}
		return false
	}
	return true
}

// syncFiles makes a cut of the index files durable: entries cut away must
// not come back after a crash and point into data written since.
func (x *segIndex) syncFiles() error {
	if err := x.idxFile.Sync(); err != nil {
		return fmt.Errorf("storage: sync index: %w", err)
	}
	if err := x.timeFile.Sync(); err != nil {
		return fmt.Errorf("storage: sync index: %w", err)
	}
	return nil
}

func (x *segIndex) closeFiles() {
	for _, f := range []vfs.File{x.idxFile, x.timeFile} {
		if f != nil {
			f.Close()
		}
	}
	x.idxFile, x.timeFile = nil, nil
}

// readOffsetIndex parses an .index file, keeping the longest prefix of
// entries that increase and point inside the segment.
func readOffsetIndex(fsys vfs.FS, path string, segSize int64) ([]offsetEntry, error) {
	b, err := readAll(fsys, path)
	if err != nil {
		return nil, err
	}
	var out []offsetEntry
	for i := 0; i+offsetEntrySize <= len(b); i += offsetEntrySize {
		e := offsetEntry{rel: binary.BigEndian.Uint32(b[i:]), pos: binary.BigEndian.Uint32(b[i+4:])}
		if int64(e.pos) >= segSize || e.pos == 0 || (len(out) > 0 && (e.rel <= out[len(out)-1].rel || e.pos <= out[len(out)-1].pos)) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// readTimeIndex parses a .timeindex file, keeping the longest valid prefix.
func readTimeIndex(fsys vfs.FS, path string) ([]timeEntry, error) {
	b, err := readAll(fsys, path)
	if err != nil {
		return nil, err
	}
	var out []timeEntry
	for i := 0; i+timeEntrySize <= len(b); i += timeEntrySize {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(b[i:])), rel: binary.BigEndian.Uint32(b[i+8:]), pos: -1}
		// Timestamps never decrease (a running maximum).
		if len(out) > 0 && (e.ts < out[len(out)-1].ts || e.rel < out[len(out)-1].rel) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// readAll reads a whole small file; a missing file reads as empty.
func readAll(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && int64(len(b)) != n {
		return nil, fmt.Errorf("storage: read %s: %w", path, err)
	}
	return b, nil
}

// readLastTime reads only the last entry of a sealed segment's time index:
// the newest timestamp in the segment, written when it was sealed with the
// relative offset of the next segment. It costs one small read, so Open
// stays independent of the data size. ok is false unless the entry is that
// final one (a short or missing index: the timestamp is then found by a scan
// when needed).
func readLastTime(fsys vfs.FS, path string, nextRel int64) (ts int64, ok bool) {
	f, err := fsys.Open(path)
	if err != nil {
		return -1, false
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil || n < timeEntrySize || n%timeEntrySize != 0 {
		return -1, false
	}
	var b [timeEntrySize]byte
	if _, err := f.ReadAt(b[:], n-timeEntrySize); err != nil {
		return -1, false
	}
	if int64(binary.BigEndian.Uint32(b[8:])) != nextRel {
		return -1, false
	}
	return int64(binary.BigEndian.Uint64(b[:])), true
}
