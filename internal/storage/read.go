package storage

import (
	"errors"
	"fmt"
	"sort"

	"github.com/sluice-mq/sluice/internal/batch"
)

// maxRepairs bounds how many damaged ranges one read may quarantine before
// it gives up (each is found, quarantined and stepped over).
const maxRepairs = 1 << 10

// errTooMuchDamage: a read met more damage than maxRepairs.
var errTooMuchDamage = errors.New("storage: too many damaged batches in one read")

// Read returns whole batches starting with the one that contains offset,
// up to about maxBytes: at least one whole batch even if it is larger
// (Kafka fetch semantics), never a partial batch, never past the high
// watermark, never across a segment boundary or a quarantined range. Every
// returned batch has been checked (framing, CRC-32C, offsets). A damaged
// batch is quarantined (see Quarantined) and skipped: an offset inside it
// reads as the first good batch after it, as after compaction.
//
// offset == HighWatermark() returns (nil, nil): nothing yet. Below the log
// start or above the high watermark: ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for range maxRepairs {
		loc, err := l.locate(offset)
		if err != nil || loc.seg == nil {
			return nil, err
		}
		buf, ce, err := loc.seg.readBatches(loc, maxBytes)
		if err != nil {
			return nil, err
		}
		if ce != nil {
			if _, qerr := l.quarantineDamage(loc.i, ce, loc.limit); qerr != nil && len(buf) == 0 {
				ce.Offset = offset
				return nil, qerr
			}
			if len(buf) == 0 {
				continue // the first batch was damaged: read again past it
			}
		}
		return buf, nil
	}
	return nil, errTooMuchDamage
}

// readBatches reads whole batches from loc, validating each, and stops at a
// quarantined range, at maxBytes or at the first damaged batch, which it
// returns with what was good before it.
func (s *segment) readBatches(loc location, maxBytes int) ([]byte, *CorruptionError, error) {
	limit := loc.limit
	if r, ok := s.nextQuarantined(loc.pos + 1); ok && r.pos < limit {
		limit = r.pos
	}
	n := min(max(int64(maxBytes), loc.first.Size()), limit-loc.pos)
	buf := make([]byte, n)
	if m, err := s.log.ReadAt(buf, loc.pos); err != nil && int64(m) < n {
		return nil, nil, s.readErr(loc.pos, err)
	}
	end, next := 0, loc.first.BaseOffset
	var ce *CorruptionError
	for end < len(buf) {
		if end > 0 && len(buf)-end < batch.LengthSize {
			break // maxBytes ends inside the next batch's length prefix
		}
		size, err := batch.FrameSize(buf[end:])
		if err == nil && int64(end)+size > int64(len(buf)) {
			if end > 0 {
				break // the next batch does not fit in maxBytes
			}
			err = fmt.Errorf("batch of %d bytes runs past the readable end", size)
		}
		if err == nil {
			err = batch.Validate(buf[end:int64(end)+size], 0)
		}
		var h batch.Header
		if err == nil {
			if h, _ = batch.ParseHeader(buf[end:]); !s.follows(h.BaseOffset, next) {
				err = fmt.Errorf("base offset %d, want %d", h.BaseOffset, next)
			}
		}
		if err != nil {
			ce = s.damage(loc.pos+int64(end), next, err.Error())
			break
		}
		next = h.NextOffset()
		end += int(size)
	}
	s.ver.add(loc.pos, loc.pos+int64(end), loc.first.BaseOffset, next, s.size.Load())
	return buf[:end], ce, nil
}

// HeaderAt returns the header of the batch containing offset without
// reading the batch: its base and last offsets, its leader epoch (the Raft
// term of the entry), its timestamps. Errors as Read; at the high watermark
// it returns ErrOffsetOutOfRange. For an offset in a quarantined range it
// returns the header of the first good batch after it.
func (l *Log) HeaderAt(offset int64) (batch.Header, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	loc, err := l.locate(offset)
	if err == nil && loc.seg == nil {
		err = fmt.Errorf("%w: offset %d is the high watermark", ErrOffsetOutOfRange, offset)
	}
	return loc.first, err
}

// location is where a read starts.
type location struct {
	i     int // index of seg in l.segs
	seg   *segment
	pos   int64        // position of the batch containing the offset
	first batch.Header // its header
	limit int64        // readable bytes of seg
}

// locate finds the batch containing offset (or the first after it, past a
// quarantined range), quarantining damage its header walk meets. Called
// with mu read-locked. A nil seg with a nil error means offset == high
// watermark, or nothing readable before it.
func (l *Log) locate(offset int64) (location, error) {
	if l.closed {
		return location{}, ErrClosed
	}
	// Bytes below a segment's committed size are durable and published;
	// committed is stored before hw, so loading hw first never hides bytes
	// that hw covers.
	hw := l.hw.Load()
	start := l.start.Load() // the first segment's base, or a start moved inside it
	if offset == hw && offset >= start {
		return location{}, nil
	}
	if offset < start || offset > hw {
		return location{}, fmt.Errorf("%w: offset %d, log has [%d, %d)", ErrOffsetOutOfRange, offset, start, hw)
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		limit := s.committed.Load()
		pos, h, found, err := l.findRepairing(i, offset, limit)
		if err != nil {
			var ce *CorruptionError
			if errors.As(err, &ce) {
				ce.Offset = offset
			}
			return location{}, err
		}
		if found {
			return location{i: i, seg: s, pos: pos, first: h, limit: limit}, nil
		}
	}
	return location{}, nil // a gap up to hw: nothing to read
}

// findRepairing is segment.find, quarantining the damage it meets and
// walking on past it.
func (l *Log) findRepairing(i int, offset, limit int64) (int64, batch.Header, bool, error) {
	for range maxRepairs {
		pos, h, found, err := l.segs[i].find(offset, limit)
		if ce, ok := asDamage(err); ok {
			if _, err := l.quarantineDamage(i, ce, limit); err != nil {
				return 0, h, false, err
			}
			continue
		}
		return pos, h, found, err
	}
	return 0, batch.Header{}, false, errTooMuchDamage
}

// OffsetForTime returns the first offset whose record timestamp is >= ts
// (milliseconds), using the time indexes: O(log n) lookups plus a scan of at
// most one index interval. Compressed batches are decompressed to find the
// record; one that cannot be answers its base offset. If every record is
// older, it returns -1 (Kafka's unknown offset) and a nil error.
func (l *Log) OffsetForTime(ts int64) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return -1, ErrClosed
	}
	for i, s := range l.segs {
		if s.maxTimestamp() < ts {
			continue
		}
		off, found, err := l.searchTimeRepairing(i, ts)
		if err != nil || found {
			return max(off, l.start.Load()), err
		}
	}
	return -1, nil
}

func (l *Log) searchTimeRepairing(i int, ts int64) (int64, bool, error) {
	s := l.segs[i]
	limit := s.committed.Load()
	for range maxRepairs {
		off, found, err := s.searchTime(ts, limit)
		if ce, ok := asDamage(err); ok {
			if _, err := l.quarantineDamage(i, ce, limit); err != nil {
				return 0, false, err
			}
			continue
		}
		return off, found, err
	}
	return 0, false, errTooMuchDamage
}

// searchTime finds the first record with timestamp >= ts in the segment.
func (s *segment) searchTime(ts, limit int64) (int64, bool, error) {
	s.ix.Lock()
	err := s.ensureLoaded()
	rel := s.index.timeLookup(ts)
	s.ix.Unlock()
	if err != nil {
		return 0, false, err
	}
	pos, h, found, err := s.find(s.base+rel, limit)
	if !found || err != nil {
		return 0, false, err
	}
	var hit batch.Header
	hitPos := int64(-1)
	err = s.walkHeaders(pos, h.BaseOffset, limit, func(p int64, h batch.Header) bool {
		if h.MaxTimestamp >= ts {
			hit, hitPos = h, p
			return false
		}
		return true
	})
	if err != nil || hitPos < 0 {
		return 0, false, err
	}
	return s.offsetInBatch(hitPos, hit, ts)
}

// offsetInBatch finds the first record of the batch at pos with timestamp
// >= ts.
func (s *segment) offsetInBatch(pos int64, h batch.Header, ts int64) (int64, bool, error) {
	b := make([]byte, h.Size())
	if _, err := s.log.ReadAt(b, pos); err != nil {
		return 0, false, s.readErr(pos, err)
	}
	for r, err := range batch.Records(b) {
		if err != nil && h.Compression() != batch.CompressionNone && batch.Validate(b, 0) == nil {
			return h.BaseOffset, true, nil // stored as sent, but we cannot inflate it
		}
		if err != nil {
			return 0, false, s.damage(pos, h.BaseOffset, err.Error())
		}
		if r.Timestamp >= ts {
			return r.Offset, true, nil
		}
	}
	return h.BaseOffset, true, nil
}
