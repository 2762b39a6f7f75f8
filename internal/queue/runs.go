package queue

import (
	"slices"
	"sort"
)

// run is a half-open range [start, end) of done offsets above the floor.
type run struct{ start, end int64 }

// doneSet is everything finished: all offsets below floor, plus disjoint, non-adjacent runs
// above it, sorted. An ack out of order adds or widens one run; the floor swallows the first
// run once it touches it. The number of runs is bounded by the number of unfinished messages
// between them, so it grows with messages in flight, not with the backlog.
type doneSet struct {
	floor int64
	runs  []run
}

func (d *doneSet) contains(off int64) bool {
	if off < d.floor {
		return true
	}
	i := sort.Search(len(d.runs), func(i int) bool { return d.runs[i].end > off })
	return i < len(d.runs) && d.runs[i].start <= off
}

// add marks [a, b) done, merging with any runs it overlaps or touches.
func (d *doneSet) add(a, b int64) {
	a = max(a, d.floor)
	if a >= b {
		return
	}
	rs := d.runs
	if n := len(rs); n == 0 || rs[n-1].end < a {
		// The common case: finishing at or beyond the newest run.
		d.runs = append(rs, run{a, b})
	} else {
		i := sort.Search(len(rs), func(i int) bool { return rs[i].end >= a })
		j := i
		for j < len(rs) && rs[j].start <= b {
			a, b = min(a, rs[j].start), max(b, rs[j].end)
			j++
		}
		d.runs = slices.Replace(rs, i, j, run{a, b})
	}
	if len(d.runs) > 0 && d.runs[0].start == d.floor {
		d.floor = d.runs[0].end
		d.runs[0] = run{}
		d.runs = d.runs[1:]
		if len(d.runs) == 0 {
			d.runs = nil // let a drained slice go instead of creeping forward forever
		}
	}
}

// notDone calls f for each maximal sub-range of [a, b) that is not yet done.
func (d *doneSet) notDone(a, b int64, f func(a, b int64)) {
	a = max(a, d.floor)
	i := sort.Search(len(d.runs), func(i int) bool { return d.runs[i].end > a })
	for a < b {
		if i >= len(d.runs) || d.runs[i].start >= b {
			f(a, b)
			return
		}
		if r := d.runs[i]; r.start > a {
			f(a, r.start)
		}
		a = d.runs[i].end
		i++
	}
}

// next returns the first offset at or after off that is not done.
func (d *doneSet) next(off int64) int64 {
	off = max(off, d.floor)
	i := sort.Search(len(d.runs), func(i int) bool { return d.runs[i].end > off })
	if i < len(d.runs) && d.runs[i].start <= off {
		return d.runs[i].end
	}
	return off
}
