package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// The .compacted marker.
//
// A segment the cleaner wrote has a marker file next to it,
// 00000000000000001234.compacted: its presence says the segment's batches
// may skip offsets (segment.gapped). Its 32 bytes (big-endian):
//
//	| magic "SLCM" 4 | cleanedAt ms int64 8 | tombstones int64 8 | cleanedTo int64 8 | crc32c 4 |
//
// or 40 when the segment keeps a transaction marker with a delete horizon
// (clean_txn.go): horizon int64 8, the earliest of them, before the crc.
// A horizon of 0 is written in the short form only, so every marker has
// one encoding.
//
// cleanedTo is the offset up to which the pass that wrote it had mapped
// the log: records below it have been compared with every later record
// of their key up to there; from it on the segment is still dirty (a map
// that filled inside the segment), and the next pass maps from there. It
// is the segment's end when the whole segment is clean. cleanedAt is when
// the cleaner produced the segment (tombstones below cleanedTo are dropped
// delete.retention.ms later); tombstones is how many it kept, so a pass
// can tell whether a clean log still holds any to drop. A marker that does
// not decode still marks the segment gapped, dirty from its base, with its
// tombstones counted as cleaned at Open (kept a full retention longer,
// never dropped early).
const (
	markerSuffix  = ".compacted"
	markerSize    = 32
	markerSizeTxn = 40
)

var markerMagic = [4]byte{'S', 'L', 'C', 'M'}

var errBadMarker = errors.New("storage: bad .compacted marker")

// markerInfo is what a marker says.
type markerInfo struct {
	cleanedAt, tombstones, cleanedTo int64
	// horizon is the earliest delete horizon (ms) of the transaction
	// markers the segment keeps; 0: none. A pass is due once it passes.
	horizon int64
}

// encodeMarker is the marker's bytes.
func encodeMarker(mi markerInfo) []byte {
	b := make([]byte, 0, markerSizeTxn)
	b = append(b, markerMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(mi.cleanedAt))
	b = binary.BigEndian.AppendUint64(b, uint64(mi.tombstones))
	b = binary.BigEndian.AppendUint64(b, uint64(mi.cleanedTo))
	if mi.horizon != 0 {
		b = binary.BigEndian.AppendUint64(b, uint64(mi.horizon))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeMarker reads a marker's bytes.
func decodeMarker(b []byte) (markerInfo, error) {
	var mi markerInfo
	if (len(b) != markerSize && len(b) != markerSizeTxn) || [4]byte(b[:4]) != markerMagic {
		return mi, fmt.Errorf("%w: %d bytes", errBadMarker, len(b))
	}
	body := len(b) - 4
	if crc32.Checksum(b[:body], castagnoli) != binary.BigEndian.Uint32(b[body:]) {
		return mi, fmt.Errorf("%w: checksum", errBadMarker)
	}
	mi = markerInfo{cleanedAt: int64(binary.BigEndian.Uint64(b[4:])), tombstones: int64(binary.BigEndian.Uint64(b[12:])),
		cleanedTo: int64(binary.BigEndian.Uint64(b[20:]))}
	if len(b) == markerSizeTxn {
		if mi.horizon = int64(binary.BigEndian.Uint64(b[28:])); mi.horizon <= 0 {
			return markerInfo{}, fmt.Errorf("%w: delete horizon %d", errBadMarker, mi.horizon)
		}
	}
	if mi.tombstones < 0 || mi.cleanedTo < 0 {
		return markerInfo{}, fmt.Errorf("%w: %d tombstones, clean to %d", errBadMarker, mi.tombstones, mi.cleanedTo)
	}
	return mi, nil
}

// follows reports whether a batch based at base may come right after the
// batches that end before want: exactly at want, or past it in a segment
// the cleaner wrote (offsets of removed records leave gaps).
func (s *segment) follows(base, want int64) bool {
	return base == want || (s.gapped && base > want)
}

// loadMarker sets gapped and mark of a segment Open found with a marker.
func (s *segment) loadMarker(nowMs int64) {
	s.gapped = true
	b, err := readAll(s.files, s.fs, s.path(markerSuffix))
	if err == nil {
		s.mark, err = decodeMarker(b)
	}
	if err != nil {
		s.logger.Warn("storage: cleaner marker unreadable; the segment is cleaned again, its tombstones kept a full delete retention from now",
			"segment", s.path(logSuffix), "err", err)
		s.mark = markerInfo{cleanedAt: nowMs, tombstones: 1}
	}
}

// writeFileSynced creates path holding b, durably (the directory entry is
// the caller's to sync).
func writeFileSynced(fsys vfs.FS, path string, b []byte) error {
	f, err := fsys.Create(path)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
