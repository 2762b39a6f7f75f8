package storage

import (
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
		return nil, fmt.Errorf("storage: read %s at %d: %w", s.f.Name(), pos, err)
	}
	return s.buf[:n], nil
}

// scanResult is what a tail scan learned.
type scanResult struct {
	end  int64 // position after the last whole, valid batch
	next int64 // offset after it
	err  error // why the scan stopped before the end (nil at a clean end)
}

// scanFrom validates batches from pos (a batch boundary holding offset
// want) to limit, noting each in the index. It stops at the first batch
// that is torn, fails its CRC, or breaks the offset sequence.
func (s *segment) scanFrom(x *segIndex, pos, want, limit int64) scanResult {
	sc := scanner{f: s.log, pos: pos, end: limit}
	res := scanResult{end: pos, next: want}
	for {
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
			if h.BaseOffset != res.next || h.LastOffset()-s.base > math.MaxUint32 {
				err = fmt.Errorf("%w: batch at %d has base offset %d, want %d", errTorn, p, h.BaseOffset, res.next)
			}
		}
		if err != nil {
			res.err = err
			return res
		}
		x.note(uint32(h.BaseOffset-s.base), p, h.Size(), h.MaxTimestamp)
		res.end = p + h.Size()
		res.next = h.NextOffset()
	}
}

// ensureLoaded loads a sealed segment's indexes on first use. A missing or
// damaged index is rebuilt in memory by scanning the segment; the next roll
// or Open does not depend on it.
func (s *segment) ensureLoaded() error {
	x := &s.index
	if x.loaded {
		return nil
	}
	size := s.size.Load()
	offs, err1 := readOffsetIndex(s.fs, s.path(indexSuffix), size)
	times, err2 := readTimeIndex(s.fs, s.path(timeIndexSuffix))
	sealedOK := len(times) > 0 && s.base+int64(times[len(times)-1].rel) == s.sealedNext
	if err1 == nil && err2 == nil && (size == 0 || sealedOK) {
		x.offsets, x.times, x.loaded = offs, times, true
		if len(times) > 0 {
			x.maxTS, x.maxTSKnown = times[len(times)-1].ts, true
		}
		return nil
	}
	// Rebuild from the log. Header checks only: a corrupt batch stops the
	// rebuild and is reported when read.
	fresh := segIndex{interval: x.interval, maxTS: -1}
	res := s.scanFrom(&fresh, 0, s.base, size)
	if res.err != nil {
		logRebuild(s, res)
	}
	x.offsets, x.times, x.maxTS, x.maxTSKnown, x.loaded = fresh.offsets, fresh.times, fresh.maxTS, true, true
	return nil
}

func logRebuild(s *segment, res scanResult) {
	if s.logger != nil {
		s.logger.Warn("storage: index rebuild stopped at damaged batch", "path", s.path(logSuffix), "position", res.end, "err", res.err)
	}
}

// lookupOffset returns where to start scanning for offset.
func (s *segment) lookupOffset(offset int64) (int64, error) {
	s.ix.Lock()
	defer s.ix.Unlock()
	if err := s.ensureLoaded(); err != nil {
		return 0, err
	}
	return s.index.lookup(offset - s.base), nil
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

// seal ends the segment's life as the active one: flushes every index entry,
// appends the final time entry (the segment's max timestamp, which Open reads
// cheaply), syncs the index files if durable is set and closes them.
func (s *segment) seal(next int64, durable bool) error {
	s.ix.Lock()
	defer s.ix.Unlock()
	x := &s.index
	size := s.size.Load()
	// The final entry is written even if the maximum did not grow since the
	// last one: Open recognizes a complete index by it.
	if x.maxTS >= 0 {
		x.times = append(x.times, timeEntry{ts: x.maxTS, rel: uint32(next - s.base), pos: size - 1})
	}
	s.sealedNext = next
	x.flush(size)
	var err error
	if durable && x.idxFile != nil && !x.broken {
		if err = x.idxFile.Sync(); err == nil {
			err = x.timeFile.Sync()
		}
	}
	if x.broken {
		// Better no index than a wrong one: Open rebuilds it.
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
