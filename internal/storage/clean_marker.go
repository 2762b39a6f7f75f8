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
// may skip offsets (segment.gapped), and that every record in it has been
// through a clean, so the dirty part of the log starts after the last
// marked segment. Its 24 bytes (big-endian):
//
//	| magic "SLCM" 4 | cleanedAt ms int64 8 | tombstones int64 8 | crc32c 4 |
//
// cleanedAt is when the cleaner produced the segment (tombstones in it are
// dropped delete.retention.ms later); tombstones is how many it kept, so a
// pass can tell whether a clean log still holds any to drop. A marker that
// does not decode still marks the segment gapped, with cleanedAt unknown
// (taken as "now" at Open: tombstones are then kept a full retention
// longer, never dropped early).
const (
	markerSuffix = ".compacted"
	markerSize   = 24
)

var markerMagic = [4]byte{'S', 'L', 'C', 'M'}

var errBadMarker = errors.New("storage: bad .compacted marker")

// encodeMarker is the marker's bytes.
func encodeMarker(cleanedAt, tombstones int64) []byte {
	b := make([]byte, 0, markerSize)
	b = append(b, markerMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(cleanedAt))
	b = binary.BigEndian.AppendUint64(b, uint64(tombstones))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeMarker reads a marker's bytes.
func decodeMarker(b []byte) (cleanedAt, tombstones int64, err error) {
	if len(b) != markerSize || [4]byte(b[:4]) != markerMagic {
		return 0, 0, fmt.Errorf("%w: %d bytes", errBadMarker, len(b))
	}
	if crc32.Checksum(b[:20], castagnoli) != binary.BigEndian.Uint32(b[20:]) {
		return 0, 0, fmt.Errorf("%w: checksum", errBadMarker)
	}
	cleanedAt, tombstones = int64(binary.BigEndian.Uint64(b[4:])), int64(binary.BigEndian.Uint64(b[12:]))
	if tombstones < 0 {
		return 0, 0, fmt.Errorf("%w: %d tombstones", errBadMarker, tombstones)
	}
	return cleanedAt, tombstones, nil
}

// follows reports whether a batch based at base may come right after the
// batches that end before want: exactly at want, or past it in a segment
// the cleaner wrote (offsets of removed records leave gaps).
func (s *segment) follows(base, want int64) bool {
	return base == want || (s.gapped && base > want)
}

// loadMarker sets gapped, cleanedAt and tombstones of a segment Open found
// with a marker.
func (s *segment) loadMarker(nowMs int64) {
	s.gapped = true
	b, err := readAll(s.files, s.fs, s.path(markerSuffix))
	if err == nil {
		s.cleanedAt, s.tombstones, err = decodeMarker(b)
	}
	if err != nil {
		s.logger.Warn("storage: cleaner marker unreadable; its tombstones are kept a full delete retention from now",
			"segment", s.path(logSuffix), "err", err)
		s.cleanedAt, s.tombstones = nowMs, 1
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
