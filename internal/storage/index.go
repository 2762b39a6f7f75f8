package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"slices"
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
	// sealTail: the time file still ends with the final entry and seal
	// trailer of the last clean close, after the flushed entries (Open left
	// the files as they were). The first append cuts them (unseal); a
	// Close with nothing appended leaves the files alone.
	sealTail bool
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

// lookup returns the position and relative offset of the last indexed
// batch with base <= base+rel (0, 0 if none).
func (x *segIndex) lookup(rel int64) (int64, int64) {
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].rel) > rel })
	if i == 0 {
		return 0, 0
	}
	return int64(x.offsets[i-1].pos), int64(x.offsets[i-1].rel)
}

// lastEntryBefore returns the greatest indexed position <= pos and its
// relative offset.
func (x *segIndex) lastEntryBefore(pos int64) (int64, int64) {
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].pos) > pos })
	if i == 0 {
		return 0, 0
	}
	return int64(x.offsets[i-1].pos), int64(x.offsets[i-1].rel)
}

// drop removes the offset entry at pos and the time entry paired with it,
// and reports whether there was one. Once an entry already in the files is
// dropped they no longer match memory: they are given up (broken) and
// rebuilt at the next open.
func (x *segIndex) drop(pos int64) bool {
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].pos) >= pos })
	if i == len(x.offsets) || int64(x.offsets[i].pos) != pos {
		return false
	}
	rel := x.offsets[i].rel
	x.offsets = slices.Delete(x.offsets, i, i+1)
	if i < x.offFlushed {
		x.offFlushed--
		x.broken = x.broken || x.idxFile != nil
	}
	if j := sort.Search(len(x.times), func(j int) bool { return x.times[j].rel >= rel }); j < len(x.times) && x.times[j].rel == rel {
		x.times = slices.Delete(x.times, j, j+1)
		if j < x.timeFlushed {
			x.timeFlushed--
			x.broken = x.broken || x.timeFile != nil
		}
	}
	return true
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

// cutSealTail cuts the last clean close's final entry and trailer off the
// time file, durably: recovery takes a seal for the exact end of the data,
// so it must be gone before any batch past that end can be acknowledged.
func (x *segIndex) cutSealTail() error {
	x.sealTail = false
	if err := x.timeFile.Truncate(int64(x.timeFlushed * timeEntrySize)); err != nil {
		return err
	}
	return x.timeFile.Sync()
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

// parseOffsetIndex keeps the longest prefix of entries that increase and
// point inside the segment.
func parseOffsetIndex(b []byte, segSize int64) []offsetEntry {
	var out []offsetEntry
	for i := 0; i+offsetEntrySize <= len(b); i += offsetEntrySize {
		e := offsetEntry{rel: binary.BigEndian.Uint32(b[i:]), pos: binary.BigEndian.Uint32(b[i+4:])}
		if int64(e.pos) >= segSize || e.pos == 0 || (len(out) > 0 && (e.rel <= out[len(out)-1].rel || e.pos <= out[len(out)-1].pos)) {
			break
		}
		out = append(out, e)
	}
	return out
}

// The seal trailer.
//
// When a segment is sealed (and when a log is closed, which seals its
// active segment) a last 12-byte entry is appended to its .timeindex, after
// the final time entry: timestamp field trailerMark, relative-offset field
// the CRC-32C of the .index file followed by the .timeindex before the
// trailer. A sealed segment's indexes are used only if the trailer is there
// and matches; otherwise they are rebuilt by scanning the segment.
const trailerMark uint64 = 1<<63 | 0x736c75696365 // "sluice", as a timestamp far below any real one

// sealCRC is the trailer's checksum of the index files' bytes.
func sealCRC(idx, times []byte) uint32 {
	return crc32.Update(crc32.Checksum(idx, castagnoli), castagnoli, times)
}

// splitTrailer separates a .timeindex's seal trailer from its entries.
func splitTrailer(b []byte) (entries []byte, crc uint32, ok bool) {
	n := len(b) - len(b)%timeEntrySize
	if n < timeEntrySize || binary.BigEndian.Uint64(b[n-timeEntrySize:]) != trailerMark {
		return b[:n], 0, false
	}
	return b[:n-timeEntrySize], binary.BigEndian.Uint32(b[n-4:]), true
}

// parseTimeIndex keeps the longest valid prefix of time entries (a trailer
// must have been split off).
func parseTimeIndex(b []byte) []timeEntry {
	var out []timeEntry
	for i := 0; i+timeEntrySize <= len(b); i += timeEntrySize {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(b[i:])), rel: binary.BigEndian.Uint32(b[i+8:]), pos: -1}
		// Timestamps never decrease (a running maximum).
		if len(out) > 0 && (e.ts < out[len(out)-1].ts || e.rel < out[len(out)-1].rel) {
			break
		}
		out = append(out, e)
	}
	return out
}

// encodeIndex is what the index files hold for these entries.
func encodeIndex(offs []offsetEntry, times []timeEntry) (idx, tidx []byte) {
	for _, e := range offs {
		idx = binary.BigEndian.AppendUint32(idx, e.rel)
		idx = binary.BigEndian.AppendUint32(idx, e.pos)
	}
	for _, e := range times {
		tidx = binary.BigEndian.AppendUint64(tidx, uint64(e.ts))
		tidx = binary.BigEndian.AppendUint32(tidx, e.rel)
	}
	return idx, tidx
}

// readAll reads a whole small file through the cache's budget; a missing
// file reads as empty.
func readAll(files *FileCache, fsys vfs.FS, path string) ([]byte, error) {
	var b []byte
	err := files.withFile(fsys, path, func(f vfs.File) error {
		var err error
		b, err = readFileAll(f)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// readLastTime reads only the end of a sealed segment's time index: the
// final entry, the newest timestamp in the segment written when it was
// sealed with the relative offset of the next segment, before the seal
// trailer. It costs one small read, so Open stays independent of the data
// size. ok is false unless the entry is that final one (a short or missing
// index: the timestamp is then found by a scan when needed). The trailer's
// CRC is not checked here: what this answers is used to skip segments, and
// retention checks it (ensureLoaded) before it deletes by time.
func readLastTime(files *FileCache, fsys vfs.FS, path string, nextRel int64) (ts int64, ok bool) {
	var b [2 * timeEntrySize]byte
	err := files.withFile(fsys, path, func(f vfs.File) error {
		n, err := f.Size()
		if err != nil || n < 2*timeEntrySize || n%timeEntrySize != 0 {
			return errNoFinal
		}
		_, err = f.ReadAt(b[:], n-2*timeEntrySize)
		return err
	})
	if err != nil {
		return -1, false
	}
	if _, _, ok := splitTrailer(b[:]); !ok {
		return -1, false
	}
	if int64(binary.BigEndian.Uint32(b[8:])) != nextRel {
		return -1, false
	}
	return int64(binary.BigEndian.Uint64(b[:])), true
}

var errNoFinal = errors.New("no final time entry")
