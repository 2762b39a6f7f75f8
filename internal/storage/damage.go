package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/batch"
)

// Damage.
//
// A batch is damaged when its bytes are not a whole RecordBatch v2 (magic,
// lengths, CRC-32C, record count) or it does not carry the offset the batch
// before it ends at. Its base offset and length sit outside the CRC, so a
// damaged length can point anywhere: the batches after it are found again by
// resynchronising, a scan byte by byte for the next position that holds a
// valid batch, one whose base offset can follow the damage (above the
// offset expected, and by no more offsets than there are bytes between) and,
// where another batch follows it, whose successor continues its offsets.
// The damaged bytes, from the damaged batch to that next good batch, are
// quarantined as one range: readers skip it and see its offsets as a gap.

// errDamaged marks a *CorruptionError found by a walk or a scan, which the
// log can quarantine (an I/O error is never damage).
var errDamaged = errors.New("damaged batch")

// damage is a damaged batch found at pos of a segment, where offset want
// was expected.
func (s *segment) damage(pos, want int64, why string) *CorruptionError {
	return &CorruptionError{Path: s.path(logSuffix), Offset: want, Position: pos, want: want,
		from: pos, fromWant: want, Err: fmt.Errorf("%w: %s", errDamaged, why)}
}

// resyncBlock is how much resync reads at a time.
const resyncBlock = 1 << 20

// magicOffset is where a batch header holds its magic byte.
const magicOffset = 16

// resync finds the first valid batch after the damaged batch at pos, where
// offset want was expected, before limit. It returns its position and
// header; found is false if there is none.
func (s *segment) resync(pos, want, limit int64) (q int64, h batch.Header, found bool, err error) {
	fallback := int64(-1)
	var fh batch.Header
	buf := make([]byte, resyncBlock+batch.HeaderSize)
	for start := pos + 1; start+batch.HeaderSize <= limit; start += resyncBlock {
		n := min(int64(len(buf)), limit-start)
		if m, err := s.log.ReadAt(buf[:n], start); err != nil && int64(m) < n {
			return 0, h, false, s.readErr(start, err)
		}
		// Candidates: a magic byte 2 at offset 16 of a header that fits.
		for i := int64(0); i < resyncBlock && i+batch.HeaderSize <= n; i++ {
			j := bytes.IndexByte(buf[i+magicOffset:n-batch.HeaderSize+magicOffset+1], batch.Magic)
			if j < 0 || i+int64(j) >= resyncBlock {
				break
			}
			i += int64(j)
			c := start + i
			ok, chained, ch, err := s.candidate(c, pos, want, limit, buf[i:n])
			if err != nil {
				return 0, h, false, err
			}
			if ok && chained {
				return c, ch, true, nil
			}
			if ok && fallback < 0 {
				fallback, fh = c, ch
			}
		}
	}
	if fallback >= 0 {
		return fallback, fh, true, nil
	}
	return 0, h, false, nil
}

// candidate checks whether a valid batch that can follow the damage at pos
// starts at c (hdr holds the bytes from c on, at least a header), and
// whether the next header continues its offsets (or it ends at limit).
func (s *segment) candidate(c, pos, want, limit int64, hdr []byte) (ok, chained bool, h batch.Header, err error) {
	h, _ = batch.ParseHeader(hdr)
	size := h.Size()
	if h.Magic != batch.Magic || h.BatchLength < batch.HeaderSize-batch.LengthSize ||
		int(h.BatchLength) > s.maxBatch || c+size > limit ||
		h.BaseOffset < want+1 || (!s.gapped && h.BaseOffset > want+(c-pos)) {
		return false, false, h, nil
	}
	b := make([]byte, size)
	if m, err := s.log.ReadAt(b, c); err != nil && int64(m) < size {
		return false, false, h, s.readErr(c, err)
	}
	if batch.Validate(b, 0) != nil {
		return false, false, h, nil
	}
	next := c + size
	if next+batch.HeaderSize > limit {
		return true, next == limit, h, nil
	}
	var nh [batch.HeaderSize]byte
	if m, err := s.log.ReadAt(nh[:], next); err != nil && m < len(nh) {
		return false, false, h, s.readErr(next, err)
	}
	return true, nh[magicOffset] == batch.Magic && s.follows(int64(binary.BigEndian.Uint64(nh[:8])), h.NextOffset()), h, nil
}

// quarantineDamage quarantines the damaged batch ce found in segment i
// (readable to limit) through to the next valid batch, and returns the
// range. In a sealed segment damage with nothing valid after it is
// quarantined to the segment's end; in the active segment it is only
// believed where a later valid batch proves the bytes are not simply the
// end of what was written (the active segment's checked tail always has
// one), and otherwise ce is returned. Called with l.mu read-locked.
func (l *Log) quarantineDamage(i int, ce *CorruptionError, limit int64) (qrange, error) {
	s := l.segs[i]
	if ce.from < ce.Position {
		// Found by a header walk: the first damaged batch may be before it.
		res := s.scanFrom(nil, ce.from, ce.fromWant, limit, 0)
		d, ok := asDamage(res.err)
		switch {
		case ok:
			d.Offset = ce.Offset
			ce = d
		case res.err != nil:
			return qrange{}, res.err
		default:
			return qrange{}, ce // the bytes check out after all: nothing to quarantine
		}
	}
	q, h, found, err := s.resync(ce.Position, ce.want, limit)
	if err != nil {
		return qrange{}, err
	}
	r := qrange{pos: ce.Position, end: q, first: ce.want, last: h.BaseOffset - 1}
	if !found {
		if i == len(l.segs)-1 {
			return qrange{}, ce
		}
		r.end, r.last = limit, l.segs[i+1].base-1
	}
	s.q.add(s, r, ce.Err.Error())
	return r, nil
}

// asDamage returns err as a damage report, if it is one.
func asDamage(err error) (*CorruptionError, bool) {
	var ce *CorruptionError
	if errors.As(err, &ce) && errors.Is(ce.Err, errDamaged) {
		return ce, true
	}
	return nil, false
}
