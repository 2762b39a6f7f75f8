package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// scanBlock is how much a scanner reads at once.
const scanBlock = 1 << 20

// errTorn marks bytes at the end of a file that do not form a whole, valid
// batch.
var errTorn = errors.New("torn or corrupt batch")

// scanner walks the batches of a segment file from a batch boundary,
// reading in large blocks.
type scanner struct {
	f    vfs.File
	pos  int64 // position of the next batch
	end  int64 // stop here
	buf  []byte
	bpos int64 // file position of buf[0]
}

// next returns the next batch (aliasing the scanner's buffer until the next
// call) and its position; io.EOF exactly at end; errTorn if what is left is
// not a whole batch.
func (s *scanner) next() (int64, []byte, error) {
	if s.pos >= s.end {
		return s.pos, nil, io.EOF
	}
	if s.end-s.pos < batch.HeaderSize {
		return s.pos, nil, errTorn
	}
	p, err := s.window(s.pos, batch.LengthSize)
	if err != nil {
		return s.pos, nil, err
	}
	n, err := batch.FrameSize(p)
	if err != nil || n > s.end-s.pos {
		return s.pos, nil, errTorn
	}
	b, err := s.window(s.pos, n)
	if err != nil {
		return s.pos, nil, err
	}
	pos := s.pos
	s.pos += n
	return pos, b, nil
}

// window returns n bytes at pos, reading a new block if needed.
func (s *scanner) window(pos, n int64) ([]byte, error) {
	if pos >= s.bpos && pos+n <= s.bpos+int64(len(s.buf)) {
		return s.buf[pos-s.bpos : pos-s.bpos+n], nil
	}
	want := min(max(n, scanBlock), s.end-pos)
	if int64(cap(s.buf)) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	s.bpos = pos
	if m, err := s.f.ReadAt(s.buf, pos); err != nil && int64(m) < want {
		s.buf = s.buf[:0]
		return nil, &ioError{fmt.Errorf("storage: read %s at %d: %w", s.f.Name(), pos, err)}
	}
	return s.buf[:n], nil
}

// scanResult is what a scan learned.
type scanResult struct {
	end  int64 // position after the last whole, valid batch (or quarantined range)
	next int64 // offset after it
	err  error // why the scan stopped before its limit (nil at a clean end); damage is a *CorruptionError (asDamage)
}

// scanFrom validates batches from pos (a batch boundary holding offset
// want) to limit, noting each in x (if not nil) and stepping over
// quarantined ranges. It stops at the first batch that is torn, fails its
// CRC, or breaks the offset sequence, reporting it as damage; with budget >
// 0 it also stops at the first batch boundary at least budget bytes on.
func (s *segment) scanFrom(x *segIndex, pos, want, limit, budget int64) scanResult {
	sc := scanner{f: s.log, pos: pos, end: limit}
	res := scanResult{end: pos, next: want}
	for budget <= 0 || res.end-pos < budget {
		if r, ok := s.quarantinedAt(sc.pos); ok {
			sc.pos, res.end, res.next = r.end, r.end, r.last+1
			if x != nil {
				x.sinceEntry += r.end - r.pos
			}
			continue
		}
		p, b, err := sc.next()
		if err == io.EOF {
			return res
		}
		if err == nil {
			err = batch.Validate(b, 0)
		}
		var h batch.Header
		if err == nil {
			h, _ = batch.ParseHeader(b)
			if !s.follows(h.BaseOffset, res.next) || h.LastOffset()-s.base > math.MaxUint32 {
				err = fmt.Errorf("base offset %d, want %d", h.BaseOffset, res.next)
			}
		}
		if err != nil {
			if !isIOError(err) {
				err = s.damage(p, res.next, err.Error())
			}
			res.err = err
			return res
		}
		if x != nil {
			x.note(uint32(h.BaseOffset-s.base), p, h.Size(), h.MaxTimestamp)
		}
		res.end = p + h.Size()
		res.next = h.NextOffset()
	}
	return res
}

// ioError marks a read that failed, as opposed to bytes that are wrong.
type ioError struct{ err error }

func (e *ioError) Error() string { return e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }

func isIOError(err error) bool {
	var ie *ioError
	return errors.As(err, &ie)
}

// ensureLoaded loads a sealed segment's indexes on first use. They are
// used only if their seal trailer matches them; otherwise they are rebuilt
// in memory by scanning the segment (which also verifies every batch and
// quarantines the damaged ones). Called with s.ix held.
func (s *segment) ensureLoaded() error {
	x := &s.index
	if x.loaded {
		return nil
	}
	size := s.size.Load()
	idx, err1 := readAll(s.files, s.fs, s.path(indexSuffix))
	tidx, err2 := readAll(s.files, s.fs, s.path(timeIndexSuffix))
	entries, crc, sealed := splitTrailer(tidx)
	if err1 == nil && err2 == nil && sealed && len(idx)%offsetEntrySize == 0 && sealCRC(idx, entries) == crc {
		offs, times := parseOffsetIndex(idx, size), parseTimeIndex(entries)
		if len(offs)*offsetEntrySize == len(idx) && len(times)*timeEntrySize == len(entries) &&
			len(times) > 0 && s.base+int64(times[len(times)-1].rel) == s.sealedNext {
			x.offsets, x.times, x.loaded = offs, times, true
			x.maxTS, x.maxTSKnown = times[len(times)-1].ts, true
			return nil
		}
	}
	switch {
	case sealed:
		s.logger.Warn("storage: index of a sealed segment does not match its seal (damaged); rebuilding it from the segment",
			"segment", s.path(logSuffix))
	case len(idx)+len(tidx) > 0:
		// A crash between the roll that created the next segment and the
		// seal of this one, or an index written before seals had trailers.
		s.logger.Info("storage: index of a sealed segment was never sealed; rebuilding it from the segment",
			"segment", s.path(logSuffix))
	}
	return s.rebuildIndexLocked(size)
}

// rebuildIndexLocked rebuilds a sealed segment's indexes in memory by
// scanning it whole, verifying every batch on the way. Damage it meets is
// quarantined and stepped over. Called with s.ix held.
func (s *segment) rebuildIndexLocked(size int64) error {
	x := &s.index
	fresh := segIndex{interval: x.interval, maxTS: -1}
	res := s.scanRepairing(&fresh, 0, s.base, size, s.sealedNext)
	if res.err != nil {
		return res.err
	}
	s.ver.add(0, size, s.base, s.sealedNext, size)
	x.offsets, x.times, x.maxTS, x.maxTSKnown, x.loaded = fresh.offsets, fresh.times, fresh.maxTS, true, true
	return nil
}

// scanRepairing is scanFrom (without a budget) that quarantines the damage
// it meets through to the next valid batch and goes on from there. Damage
// with no valid batch after it before limit is quarantined to limit if
// endOffset (the offset after the segment's last batch) is known (>= 0),
// and returned otherwise.
func (s *segment) scanRepairing(x *segIndex, pos, want, limit, endOffset int64) scanResult {
	for range maxRepairs {
		res := s.scanFrom(x, pos, want, limit, 0)
		ce, dmg := asDamage(res.err)
		if !dmg {
			return res
		}
		q, h, found, err := s.resync(ce.Position, ce.want, limit)
		if err != nil {
			res.err = err
			return res
		}
		r := qrange{pos: ce.Position, end: q, first: ce.want, last: h.BaseOffset - 1}
		if !found {
			if endOffset < 0 {
				return res
			}
			r.end, r.last = limit, endOffset-1
		}
		s.q.add(s, r, ce.Err.Error())
		pos, want = r.end, r.last+1
	}
	return scanResult{end: pos, next: want, err: errTooMuchDamage}
}

// lookupOffset returns where to start walking for offset: a batch boundary
// and the offset the batch there holds.
func (s *segment) lookupOffset(offset int64) (int64, int64, error) {
	s.ix.Lock()
	defer s.ix.Unlock()
	if err := s.ensureLoaded(); err != nil {
		return 0, 0, err
	}
	pos, rel := s.index.lookup(offset - s.base)
	return pos, s.base + rel, nil
}

// distrust drops the index entry at pos, whose batch header disagrees with
// it, and reports whether there was one.
func (s *segment) distrust(pos int64) bool {
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.index.drop(pos) {
		return false
	}
	s.logger.Warn("storage: index entry disagrees with the segment; ignored", "segment", s.path(logSuffix), "position", pos)
	return true
}

// maxTimestamp returns the newest batch timestamp in the segment, -1 if none.
func (s *segment) maxTimestamp() int64 {
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.index.maxTSKnown {
		s.ensureLoaded()
	}
	return s.index.maxTS
}

// checkedMaxTimestamp is maxTimestamp from indexes whose seal trailer was
// checked (or rebuilt from the segment): what retention deletes by.
func (s *segment) checkedMaxTimestamp() int64 {
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.index.loaded {
		s.index.maxTSKnown = false
		if s.ensureLoaded() != nil {
			return -1 // unknown: kept
		}
	}
	return s.index.maxTS
}

// seal ends the segment's life as the active one: flushes every index entry,
// appends the final time entry (the segment's max timestamp, which Open reads
// cheaply) and the seal trailer, syncs the index files if durable is set and
// closes them.
func (s *segment) seal(next int64, durable bool) error {
	s.ix.Lock()
	defer s.ix.Unlock()
	x := &s.index
	size := s.size.Load()
	// The final entry is written even if the maximum did not grow since the
	// last one, or there are no timestamps (-1): Open recognizes a complete
	// index by it.
	s.sealedNext = next
	if x.sealTail && x.offFlushed == len(x.offsets) && x.timeFlushed == len(x.times) && next == s.cleanEnd {
		// Opened after a clean close and nothing appended since: the files
		// already hold this seal.
		x.closeFiles()
		x.offsets, x.times, x.loaded, x.sealTail = nil, nil, false, false
		return nil
	}
	if x.sealTail && x.cutSealTail() != nil {
		x.broken = true // no seal rather than a wrong one: rebuilt from the segment
	}
	x.times = append(x.times, timeEntry{ts: x.maxTS, rel: uint32(next - s.base), pos: size - 1})
	x.flush(size)
	var err error
	if x.timeFile != nil && !x.broken {
		if x.offFlushed == len(x.offsets) && x.timeFlushed == len(x.times) {
			idx, tidx := encodeIndex(x.offsets, x.times)
			var tr []byte
			tr = binary.BigEndian.AppendUint64(tr, trailerMark)
			tr = binary.BigEndian.AppendUint32(tr, sealCRC(idx, tidx))
			x.write(x.timeFile, tr, x.timeFlushed*timeEntrySize)
		}
		if durable && !x.broken {
			if err = x.idxFile.Sync(); err == nil {
				err = x.timeFile.Sync()
			}
		}
	}
	if x.broken {
		// Better no index than a wrong one: it is rebuilt from the log.
		s.fs.Remove(s.path(indexSuffix))
		s.fs.Remove(s.path(timeIndexSuffix))
	}
	x.closeFiles()
	// The entries are in the files now (or rebuilt from the log if those
	// were broken): drop them from memory until a read needs them, so the
	// memory of a log does not grow with its size. maxTS stays known.
	x.offsets, x.times, x.loaded = nil, nil, false
	return err
}
