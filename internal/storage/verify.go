package storage

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// Verification marks.
//
// Every batch a read serves must have had its CRC-32C checked since this
// process last read it from disk or wrote it. A segment keeps the byte
// ranges that have been: what this process appended (validated before
// append), what recovery scanned at Open, what a Read or ReadSection
// checked before serving it, and what the background scrub read. A read of
// bytes outside them checks them first; once a segment is covered whole,
// reads of it check nothing more (ReadSection then reads no data at all:
// the bytes go to the socket with sendfile).

// openEnd is the end of a range that extends to whatever the segment holds.
const openEnd = math.MaxInt64

// span is a checked byte range [pos, end) holding offsets [first, next):
// whole batches, or quarantined ranges, back to back. next is unknown (-1)
// when end is openEnd.
type span struct{ pos, end, first, next int64 }

// verified is a segment's checked ranges: sorted, disjoint, merged when
// they touch.
type verified struct {
	all   atomic.Bool // one span from 0 covers everything
	mu    sync.Mutex
	spans []span
}

// reset forgets every range; if from is not negative, [from, openEnd) holding
// offsets from first on is checked (a segment this process writes from
// there).
func (v *verified) reset(from, first int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.spans = v.spans[:0]
	if from >= 0 {
		v.spans = append(v.spans, span{pos: from, end: openEnd, first: first, next: -1})
	}
	v.all.Store(from == 0)
}

// covers reports whether [pos, end) has been checked.
func (v *verified) covers(pos, end int64) bool {
	if v.all.Load() {
		return true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	i := sort.Search(len(v.spans), func(i int) bool { return v.spans[i].end > pos })
	return i < len(v.spans) && v.spans[i].pos <= pos && v.spans[i].end >= end
}

// add records [pos, end) holding offsets [first, next) as checked. size is
// the segment's size, to know when it is covered whole (for a sealed
// segment; the active one is whole once a span from 0 is open-ended).
func (v *verified) add(pos, end, first, next, size int64) {
	if end <= pos || v.all.Load() {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if i := sort.Search(len(v.spans), func(i int) bool { return v.spans[i].end > pos }); i < len(v.spans) &&
		v.spans[i].pos <= pos && v.spans[i].end >= end {
		return // already covered: the common case of a read of checked bytes
	}
	n := span{pos: pos, end: end, first: first, next: next}
	out := v.spans[:0:0]
	placed := false
	for _, s := range v.spans {
		switch {
		case s.end < n.pos:
			out = append(out, s)
		case n.end < s.pos:
			if !placed {
				out, placed = append(out, n), true
			}
			out = append(out, s)
		default: // touching or overlapping: merge
			if s.pos < n.pos {
				n.pos, n.first = s.pos, s.first
			}
			if s.end > n.end {
				n.end, n.next = s.end, s.next
			}
		}
	}
	if !placed {
		out = append(out, n)
	}
	v.spans = out
	if len(out) == 1 && out[0].pos == 0 && out[0].end >= size {
		v.all.Store(true)
	}
}

// gap returns the first range of [0, limit) not checked, with the offset
// its first batch holds (base at position 0).
func (v *verified) gap(limit, base int64) (pos, end, first int64, ok bool) {
	if v.all.Load() {
		return 0, 0, 0, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	pos, first = 0, base
	for _, s := range v.spans {
		if s.pos > pos {
			return pos, min(s.pos, limit), first, pos < limit
		}
		pos, first = s.end, s.next
	}
	return pos, limit, first, pos < limit && first >= 0
}

// cut drops what lies at or after pos (TruncateSuffix cut the segment
// there) and marks [pos, openEnd) checked from offset first: what comes
// next is appended by this process.
func (v *verified) cut(pos, first int64) {
	v.mu.Lock()
	out := v.spans[:0]
	for _, s := range v.spans {
		if s.pos >= pos {
			break
		}
		if s.end > pos {
			s.end, s.next = pos, first
		}
		out = append(out, s)
	}
	v.spans = out
	v.mu.Unlock()
	v.add(pos, openEnd, first, -1, openEnd)
}
