package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testrace"
)

// TestCleanTxnModel runs random streams of plain and transactional
// batches (committed, aborted and open transactions) through passes of the
// cleaner bounded by the last stable offset, and checks each against the
// model (checkTxn). At the end, with every transaction over and time past
// delete.retention.ms, the aborted records and the markers of transactions
// with nothing left are gone.
func TestCleanTxnModel(t *testing.T) {
	testrace.NotUnderRace(t)
	for _, tc := range []struct {
		name   string
		keys   int
		buffer int64
	}{{"few keys", 20, 0}, {"many keys", 1000, 0}, {"small map", 300, 64 * mapSlotBytes}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.keys), 11))
			c := newClock()
			l := mustOpen(t, compactOptions(t, c))
			defer l.Close()
			m := newTxnModel()
			var st CleanStats
			for round := range 8 {
				m.randomTxnUpdates(t, l, c, rng, 1200, tc.keys)
				s := mustClean(t, l, m.cleanOpts(l, CleanOptions{BufferBytes: tc.buffer, DeleteRetention: time.Second}))
				st.AbortedRemoved += s.AbortedRemoved
				st.MarkersRemoved += s.MarkersRemoved
				m.checkTxnFull(t, l, cleanedEnd(l), true)
				if round > 0 && !s.Cleaned {
					t.Fatalf("round %d: nothing cleaned (%+v)", round, s)
				}
				c.t = c.t.Add(600 * time.Millisecond)
			}
			for pid := range m.pending {
				m.endTxn(t, l, c.t.UnixMilli(), pid)
			}
			m.appendKVs(t, l, c.t.UnixMilli(), nil, kv{"last", []byte("x")})
			forceRoll(t, l)
			for range 4 {
				c.t = c.t.Add(2 * time.Second)
				s := mustClean(t, l, m.cleanOpts(l, CleanOptions{BufferBytes: tc.buffer, DeleteRetention: time.Second}))
				st.AbortedRemoved += s.AbortedRemoved
				st.MarkersRemoved += s.MarkersRemoved
				m.checkTxn(t, l, cleanedEnd(l))
			}
			if st.AbortedRemoved == 0 || st.MarkersRemoved == 0 || len(m.dropped) == 0 {
				t.Fatalf("removed %d aborted records, %d markers (hook heard %d): the test exercised too little", st.AbortedRemoved, st.MarkersRemoved, len(m.dropped))
			}
			checkMarkersEarned(t, l, cleanedEnd(l))
			t.Logf("%+v", st)
		})
	}
}

// checkMarkersEarned: every marker left in the cleaned part of the log
// (below end) has a batch of its transaction left before it (the
// producer's batches since its previous marker), or a delete horizon.
func checkMarkersEarned(t *testing.T, l *Log, end int64) {
	t.Helper()
	batches := map[int64]int{}
	for _, h := range logBatches(t, l) {
		switch {
		case h.Control():
			if _, hz := h.DeleteHorizon(); !hz && h.BaseOffset < end && batches[h.ProducerID] == 0 {
				t.Fatalf("marker of producer %d at %d kept with no batch of its transaction left", h.ProducerID, h.BaseOffset)
			}
			batches[h.ProducerID] = 0
		case h.Transactional():
			batches[h.ProducerID]++
		}
	}
}

// TestCleanTxnMarkers walks one aborted and one committed transaction
// through the passes Kafka's cleaner takes them: the aborted records go at
// once while the abort marker stays (a delete horizon set); the commit
// marker stays while its transaction's record does; once the producer
// writes on, its emptied batches go, and markers past their horizon go,
// the hook hearing of them first; a hook that fails keeps them.
func TestCleanTxnMarkers(t *testing.T) {
	c := newClock()
	l := mustOpen(t, compactOptions(t, c))
	defer l.Close()
	m := newTxnModel()
	ts := c.t.UnixMilli()
	m.appendKVs(t, l, ts, nil, kv{"a", []byte("a0")}, kv{"b", []byte("b0")})
	m.appendTxn(t, l, ts, 7, false, kv{"a", []byte("aborted")}) // 2
	m.endTxn(t, l, ts, 7)                                       // 3
	m.appendTxn(t, l, ts, 8, true, kv{"b", []byte("b1")})       // 4
	m.endTxn(t, l, ts, 8)                                       // 5
	forceRoll(t, l)
	o := CleanOptions{DeleteRetention: time.Hour}
	st := mustClean(t, l, m.cleanOpts(l, o))
	if st.AbortedRemoved != 1 || st.MarkersRemoved != 0 {
		t.Fatalf("first pass %+v, want the aborted record removed, no marker", st)
	}
	kinds := func() (out []string) {
		for _, h := range logBatches(t, l) {
			k := "data"
			switch {
			case h.Control():
				k = "marker"
				if _, ok := h.DeleteHorizon(); ok {
					k = "marker+horizon"
				}
			case h.RecordCount == 0:
				k = "empty"
			}
			out = append(out, k)
		}
		return out
	}
	// The aborted batch is producer 7's last: kept empty, so its marker stays
	// without a horizon; producer 8's commit stays with its record.
	want := []string{"data", "empty", "marker", "data", "marker"}
	if got := kinds(); !equalStrings(got, want) {
		t.Fatalf("after the first pass: %v, want %v", got, want)
	}
	m.checkTxn(t, l, cleanedEnd(l))
	// Both producers write on; b's committed record is superseded.
	m.appendTxn(t, l, ts, 7, true, kv{"c", []byte("c0")})
	m.endTxn(t, l, ts, 7)
	m.appendTxn(t, l, ts, 8, true, kv{"d", []byte("d1")})
	m.endTxn(t, l, ts, 8)
	m.appendKVs(t, l, ts, nil, kv{"b", []byte("b2")})
	forceRoll(t, l)
	mustClean(t, l, m.cleanOpts(l, o))
	want = []string{"data", "marker+horizon", "marker+horizon", "data", "marker", "data", "marker", "data"}
	if got := kinds(); !equalStrings(got, want) {
		t.Fatalf("after the second pass: %v, want %v", got, want)
	}
	m.checkTxn(t, l, cleanedEnd(l))
	c.t = c.t.Add(59 * time.Minute)
	if st := mustClean(t, l, m.cleanOpts(l, o)); st.MarkersRemoved != 0 {
		t.Fatalf("markers removed before their horizon: %+v", st)
	}
	c.t = c.t.Add(2 * time.Minute)
	m.failDrop = errors.New("snapshot failed")
	if _, err := l.Clean(m.cleanOpts(l, o)); err == nil {
		t.Fatal("a pass went on though BeforeDrop failed")
	}
	if got := kinds(); !equalStrings(got, want) {
		t.Fatalf("after the failed hook: %v, want %v", got, want)
	}
	m.failDrop = nil
	if st := mustClean(t, l, m.cleanOpts(l, o)); st.MarkersRemoved != 2 {
		t.Fatalf("after the horizon: %+v, want both markers removed", st)
	}
	want = []string{"data", "data", "marker", "data", "marker", "data"}
	if got := kinds(); !equalStrings(got, want) {
		t.Fatalf("after the horizon: %v, want %v", got, want)
	}
	if len(m.dropped) != 2 || m.dropped[0] != (TxnMarker{ProducerID: 7, Offset: 3}) || m.dropped[1] != (TxnMarker{ProducerID: 8, Offset: 5, Commit: true}) {
		t.Fatalf("hook heard %+v", m.dropped)
	}
	if len(m.aborted) != 0 {
		t.Fatalf("aborted index %+v, want the removed abort marker's entry gone", m.aborted)
	}
	m.checkTxn(t, l, cleanedEnd(l))
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCleanTxnOpenUntouched: nothing at or above the last stable offset
// is cleaned, an open transaction's records stay, and without Txns a pass
// leaves transactional batches as they are.
func TestCleanTxnOpenUntouched(t *testing.T) {
	c := newClock()
	l := mustOpen(t, compactOptions(t, c))
	defer l.Close()
	m := newTxnModel()
	ts := c.t.UnixMilli()
	m.appendTxn(t, l, ts, 7, false, kv{"a", []byte("open")})
	m.appendKVs(t, l, ts, nil, kv{"a", []byte("a1")}, kv{"a", []byte("a2")})
	forceRoll(t, l)
	before := logBatches(t, l)
	if st := mustClean(t, l, m.cleanOpts(l, CleanOptions{})); st.Cleaned {
		t.Fatalf("cleaned at or above the last stable offset: %+v", st)
	}
	m.endTxn(t, l, ts, 7)
	forceRoll(t, l)
	mustClean(t, l, CleanOptions{}) // no Txns: the aborted batch stays
	if hs := logBatches(t, l); hs[0].RecordCount != 1 || !hs[0].Transactional() || len(hs) != len(before)+1 {
		t.Fatalf("without Txns: %+v", hs)
	}
	// The next pass that is due (new dirty bytes) walks from the log start
	// and removes what a pass without Txns left.
	m.appendKVs(t, l, ts, nil, kv{"b", []byte("b1")})
	forceRoll(t, l)
	if st := mustClean(t, l, m.cleanOpts(l, CleanOptions{})); st.AbortedRemoved != 1 {
		t.Fatalf("with Txns: %+v, want the aborted record removed", st)
	}
	m.checkTxn(t, l, cleanedEnd(l))
}

// TestCleanKeepsLastBatchPastMapEnd: when the offset map fills inside a
// segment, the rest of the segment is rewritten unmapped; a producer's
// batch there that loses every record (an aborted one) is still its last
// and stays, emptied, though the mapped part saw an earlier batch of it.
func TestCleanKeepsLastBatchPastMapEnd(t *testing.T) {
	c := newClock()
	l := mustOpen(t, compactOptions(t, c))
	defer l.Close()
	m := newTxnModel()
	ts := c.t.UnixMilli()
	m.appendTxn(t, l, ts, 9, true, kv{"x", []byte("x1")})
	m.endTxn(t, l, ts, 9)
	for i := range 70 { // more keys than the map holds
		m.appendKVs(t, l, ts, nil, kv{fmt.Sprintf("k%03d", i), []byte("v")})
	}
	m.appendTxn(t, l, ts, 9, false, kv{"y", []byte("aborted")})
	m.endTxn(t, l, ts, 9)
	if segs := len(logSegmentsForTest(l)); segs != 1 {
		t.Fatalf("%d segments before the roll, want the whole test in one", segs)
	}
	forceRoll(t, l)
	st := mustClean(t, l, m.cleanOpts(l, CleanOptions{BufferBytes: 64 * mapSlotBytes}))
	if !st.Cleaned || st.AbortedRemoved != 1 {
		t.Fatalf("%+v, want the aborted record removed", st)
	}
	if end := cleanedEnd(l); end >= l.HighWatermark()-2 {
		t.Fatalf("the map was clean to %d of %d: it did not fill inside the segment", end, l.HighWatermark())
	}
	m.checkTxn(t, l, cleanedEnd(l))
}

func logSegmentsForTest(l *Log) []*segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]*segment(nil), l.segs...)
}
