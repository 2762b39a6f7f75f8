package raftstore

import "sort"

// termRuns is the in-memory index of terms over the log: one run per term
// change, each holding the first index with that term. Raft terms never
// decrease along a log, so a group whose log spans k terms costs k runs of
// 16 bytes (plus the slice header): a few hundred bytes for a group that
// has seen a few elections since its last snapshot, whatever its length.
// Term(i) is a binary search, never a disk read.
type termRuns struct {
	runs []termRun
}

type termRun struct {
	start, term uint64
}

// at returns the term of index i, which must lie in the runs' span.
func (t *termRuns) at(i uint64) uint64 {
	k := sort.Search(len(t.runs), func(k int) bool { return t.runs[k].start > i })
	return t.runs[k-1].term
}

// add notes that index i (the new last) has term.
func (t *termRuns) add(i, term uint64) {
	if n := len(t.runs); n == 0 || t.runs[n-1].term != term {
		t.runs = append(t.runs, termRun{start: i, term: term})
	}
}

// truncate forgets indexes >= i.
func (t *termRuns) truncate(i uint64) {
	t.runs = t.runs[:sort.Search(len(t.runs), func(k int) bool { return t.runs[k].start >= i })]
}

// dropBelow forgets indexes < p (the new log start).
func (t *termRuns) dropBelow(p uint64) {
	k := sort.Search(len(t.runs), func(k int) bool { return t.runs[k].start > p })
	if k == 0 {
		return
	}
	t.runs = append([]termRun(nil), t.runs[k-1:]...)
	t.runs[0].start = p
}

// build fills the runs of [lo, hi] by bisection, reading terms with termOf:
// O(k log n) reads for k runs, instead of reading every header of the log.
func (t *termRuns) build(lo, hi uint64, termOf func(uint64) (uint64, error)) error {
	t.runs = nil
	tlo, err := termOf(lo)
	if err != nil {
		return err
	}
	thi, err := termOf(hi)
	if err != nil {
		return err
	}
	t.add(lo, tlo)
	if err := t.bisect(lo, hi, tlo, thi, termOf); err != nil {
		return err
	}
	t.add(hi, thi)
	return nil
}

// bisect adds the runs starting in (lo, hi) given the terms at both ends.
func (t *termRuns) bisect(lo, hi, tlo, thi uint64, termOf func(uint64) (uint64, error)) error {
	if tlo == thi || hi-lo <= 1 {
		return nil
	}
	mid := lo + (hi-lo)/2
	tm, err := termOf(mid)
	if err != nil {
		return err
	}
	if err := t.bisect(lo, mid, tlo, tm, termOf); err != nil {
		return err
	}
	t.add(mid, tm)
	return t.bisect(mid, hi, tm, thi, termOf)
}
