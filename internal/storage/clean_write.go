package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// cleanWriter writes one new segment under its temporary names (the
// .swap files of clean_swap.go): the batches the cleaner keeps, back to
// back, with the sparse indexes a roll would have written, sealed for the
// offset the segment ends at, and its .compacted marker.
type cleanWriter struct {
	fs   vfs.FS
	dir  string
	base int64
	f    vfs.File
	buf  []byte
	size int64
	x    segIndex
}

// cleanFlushBytes is how much the writer buffers between writes.
const cleanFlushBytes = 1 << 20

func newCleanWriter(fsys vfs.FS, dir string, base, interval int64) (*cleanWriter, error) {
	f, err := fsys.Create(swapTmp(dir, base, logSuffix))
	if err != nil {
		return nil, fmt.Errorf("storage: clean: %w", err)
	}
	return &cleanWriter{fs: fsys, dir: dir, base: base, f: f, x: segIndex{maxTS: -1, interval: interval}}, nil
}

// add appends one batch; the cleaner keeps batches in offset order.
func (w *cleanWriter) add(b []byte) error {
	h, _ := batch.ParseHeader(b)
	w.x.note(uint32(h.BaseOffset-w.base), w.size, int64(len(b)), h.MaxTimestamp)
	w.buf = append(w.buf, b...)
	w.size += int64(len(b))
	if len(w.buf) >= cleanFlushBytes {
		return w.flush()
	}
	return nil
}

func (w *cleanWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.f.Write(w.buf)
	if err == nil && n != len(w.buf) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(w.buf))
	}
	w.buf = w.buf[:0]
	if err != nil {
		return fmt.Errorf("storage: clean: write %s: %w", w.f.Name(), err)
	}
	return nil
}

// finish makes the segment durable under its temporary names: the .log
// synced, then both indexes sealed for next (the offset after the
// segment) with maxTS the newest timestamp the replaced segments held, so
// time retention of a compact,delete log sees the same age as before, and
// the marker. The directory is synced by the caller's commit.
func (w *cleanWriter) finish(next, maxTS int64, mi markerInfo) error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("storage: clean: fdatasync %s: %w", w.f.Name(), err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("storage: clean: %w", err)
	}
	w.f = nil
	x := &w.x
	x.maxTS = max(x.maxTS, maxTS)
	x.times = append(x.times, timeEntry{ts: x.maxTS, rel: uint32(next - w.base), pos: w.size - 1})
	idx, tidx := encodeIndex(x.offsets, x.times)
	tr := binary.BigEndian.AppendUint64(nil, trailerMark)
	tr = binary.BigEndian.AppendUint32(tr, sealCRC(idx, tidx))
	files := []struct {
		suf string
		b   []byte
	}{{indexSuffix, idx}, {timeIndexSuffix, append(tidx, tr...)}, {markerSuffix, encodeMarker(mi)}}
	for _, f := range files {
		if err := writeFileSynced(w.fs, swapTmp(w.dir, w.base, f.suf), f.b); err != nil {
			return fmt.Errorf("storage: clean: %w", err)
		}
	}
	return nil
}

// abort removes whatever the writer made. The names are temporary, so a
// crash before this leaves nothing Open would not remove too.
func (w *cleanWriter) abort() {
	if w.f != nil {
		w.f.Close()
	}
	for _, suf := range swapSuffixes {
		w.fs.Remove(swapTmp(w.dir, w.base, suf))
	}
}
