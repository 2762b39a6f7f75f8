package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// txnModel extends compactModel with transactional producers: it plays
// the broker's part (the aborted index, the last stable offset, the
// snapshot the BeforeDrop hook keeps in step) and remembers what every
// consumer must see.
type txnModel struct {
	*compactModel
	aborted  []AbortedTxn      // the broker's aborted index, by LastOffset
	open     map[int64]int64   // producer → first offset of its open transaction
	commit   map[int64]bool    // producer → how its open transaction ends
	pending  map[int64][]int64 // producer → offsets of its open transaction's records
	abortOff map[int64]bool    // offsets of aborted records
	seq      map[int64]int32   // producer → next sequence
	lastSeq  map[int64]int32   // producer → base sequence of its last data batch
	dropped  []TxnMarker       // what BeforeDrop heard
	failDrop error             // BeforeDrop's answer
}

func newTxnModel() *txnModel {
	return &txnModel{compactModel: newCompactModel(), open: map[int64]int64{}, commit: map[int64]bool{},
		pending: map[int64][]int64{}, abortOff: map[int64]bool{}, seq: map[int64]int32{}, lastSeq: map[int64]int32{}}
}

// appendTxn appends one transactional batch of producer pid, opening its
// transaction (which will commit or not) if none is open.
func (m *txnModel) appendTxn(t testing.TB, l *Log, ts int64, pid int64, commit bool, recs ...kv) {
	t.Helper()
	if _, ok := m.open[pid]; !ok {
		m.open[pid], m.commit[pid] = l.HighWatermark(), commit
	}
	rs := make([]batch.Record, len(recs))
	for i, r := range recs {
		rs[i] = batch.Record{Timestamp: ts, Key: []byte(r.key), Value: r.value}
	}
	b, err := batch.Build(rs, batch.Options{LeaderEpoch: -1, Transactional: true,
		Producer: &batch.Producer{ID: pid, Epoch: 1, BaseSequence: m.seq[pid]}})
	if err != nil {
		t.Fatal(err)
	}
	m.lastSeq[pid] = m.seq[pid]
	m.seq[pid] += int32(len(recs))
	base := mustAppend(t, l, b)[0]
	for i, r := range recs {
		off := base + int64(i)
		m.recs[off] = written{key: r.key, value: r.value, ts: ts}
		m.pending[pid] = append(m.pending[pid], off)
	}
}

// endTxn appends producer pid's marker and settles its records in the model.
func (m *txnModel) endTxn(t testing.TB, l *Log, ts int64, pid int64) {
	t.Helper()
	commit := m.commit[pid]
	b, err := batch.BuildMarker(pid, 1, commit, 0, ts)
	if err != nil {
		t.Fatal(err)
	}
	at := mustAppend(t, l, b)[0]
	for _, off := range m.pending[pid] {
		if commit {
			m.latest[m.recs[off].key] = max(m.latest[m.recs[off].key], off)
		} else {
			m.abortOff[off] = true
		}
	}
	if !commit {
		m.aborted = append(m.aborted, AbortedTxn{ProducerID: pid, FirstOffset: m.open[pid], LastOffset: at})
	}
	delete(m.open, pid)
	delete(m.pending, pid)
}

// randomTxnUpdates mixes plain updates with transactional batches of three
// producers, ending their transactions at random (two in three commit).
func (m *txnModel) randomTxnUpdates(t testing.TB, l *Log, c *clock, rng *rand.Rand, n, keys int) {
	t.Helper()
	for n > 0 {
		k := min(n, 1+rng.IntN(6))
		recs := make([]kv, k)
		for i := range recs {
			key := fmt.Sprintf("key-%05d", rng.IntN(keys))
			recs[i] = kv{key, []byte(fmt.Sprintf("v%d-%s", rng.Int64(), key))}
		}
		ts := c.t.UnixMilli()
		if pid := int64(rng.IntN(5)); pid < 3 {
			m.appendTxn(t, l, ts, 100+pid, rng.IntN(3) > 0, recs...)
		} else {
			m.appendKVs(t, l, ts, nil, recs...)
		}
		if pid := 100 + int64(rng.IntN(3)); rng.IntN(4) == 0 && len(m.pending[pid]) > 0 {
			m.endTxn(t, l, ts, pid)
		}
		c.t = c.t.Add(time.Millisecond)
		n -= k
	}
}

// lso is the last stable offset, as the broker computes it.
func (m *txnModel) lso(l *Log) int64 {
	lso := l.HighWatermark()
	for _, first := range m.open {
		lso = min(lso, first)
	}
	return lso
}

// cleanOpts bounds a pass by the last stable offset and hands it the
// aborted index; the hook drops the index entries of removed markers.
func (m *txnModel) cleanOpts(l *Log, o CleanOptions) CleanOptions {
	o.Below = m.lso(l)
	o.Txns = &CleanTxns{Aborted: slices.Clone(m.aborted), BeforeDrop: func(ms []TxnMarker) error {
		if m.failDrop != nil {
			return m.failDrop
		}
		m.dropped = append(m.dropped, ms...)
		for _, mk := range ms {
			m.aborted = slices.DeleteFunc(m.aborted, func(a AbortedTxn) bool { return a.ProducerID == mk.ProducerID && a.LastOffset == mk.Offset })
		}
		return nil
	}}
	return o
}

// logBatches reads every batch from the log start (a gap through to the
// high watermark ends it).
func logBatches(t testing.TB, l *Log) []batch.Header {
	t.Helper()
	var out []batch.Header
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		b, err := l.Read(off, 64<<10)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			h, _ := batch.ParseHeader(b)
			out = append(out, h)
			b, off = b[h.Size():], h.NextOffset()
		}
	}
	return out
}

// consume reads the log from the start as a Kafka client does, with the
// aborted index a fetch would return: read_committed skips a producer's
// transactional batches from an aborted transaction's first offset to its
// abort marker.
func (m *txnModel) consume(t testing.TB, l *Log, committed bool) []stored {
	t.Helper()
	idx := slices.Clone(m.aborted)
	sort.Slice(idx, func(i, j int) bool { return idx[i].FirstOffset < idx[j].FirstOffset })
	skip := map[int64]bool{}
	var out []stored
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		b, err := l.Read(off, 64<<10)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			h, _ := batch.ParseHeader(b)
			raw := b[:h.Size()]
			b, off = b[h.Size():], h.NextOffset()
			if committed && h.ProducerID >= 0 {
				for len(idx) > 0 && idx[0].FirstOffset <= h.LastOffset() {
					skip[idx[0].ProducerID] = true
					idx = idx[1:]
				}
			}
			if h.Control() {
				if commit, err := batch.ParseMarker(raw); err == nil && !commit {
					delete(skip, h.ProducerID)
				}
				continue
			}
			if committed && h.Transactional() && skip[h.ProducerID] {
				continue
			}
			for r, err := range batch.Records(raw) {
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, stored{off: r.Offset, key: string(r.Key), value: r.Value})
			}
		}
	}
	return out
}

// checkTxn checks a cleaned log against the model: both isolation levels
// see only written records, in order, read_committed no aborted one, and
// the latest committed record of every key; read_uncommitted no aborted
// record below the stable cleaned end; a full rescan of the transactions
// finds exactly the open ones; each producer's last batch holds its
// sequence; every marker left has a batch of its transaction left, or a
// delete horizon.
func (m *txnModel) checkTxn(t testing.TB, l *Log, stableEnd int64) {
	t.Helper()
	m.checkTxnFull(t, l, stableEnd, false)
}

// checkTxnFull is checkTxn, and with full set no key appears before its
// latest record below stableEnd (as compactModel.check).
func (m *txnModel) checkTxnFull(t testing.TB, l *Log, stableEnd int64, full bool) {
	t.Helper()
	for _, committed := range []bool{true, false} {
		seen, last := map[int64]bool{}, int64(-1)
		for _, r := range m.consume(t, l, committed) {
			w, ok := m.recs[r.off]
			if !ok || w.key != r.key || string(w.value) != string(r.value) || r.off <= last {
				t.Fatalf("committed=%v: offset %d holds %q=%q after %d, written %q=%q (%v)", committed, r.off, r.key, r.value, last, w.key, w.value, ok)
			}
			if m.abortOff[r.off] && (committed || r.off < stableEnd) {
				t.Fatalf("committed=%v: aborted record at %d seen (stable cleaned end %d)", committed, r.off, stableEnd)
			}
			if full && r.off < stableEnd && m.latest[r.key] < stableEnd && m.latest[r.key] != r.off {
				t.Fatalf("committed=%v: offset %d: key %q superseded at %d but kept below the cleaned end %d", committed, r.off, r.key, m.latest[r.key], stableEnd)
			}
			seen[r.off], last = true, r.off
		}
		for k, off := range m.latest {
			if !seen[off] && m.recs[off].value != nil {
				t.Fatalf("committed=%v: latest record of %q (offset %d) lost", committed, k, off)
			}
		}
	}
	hs := logBatches(t, l)
	open, lastBatch := map[int64]bool{}, map[int64]batch.Header{}
	for _, h := range hs {
		switch {
		case h.Control():
			open[h.ProducerID] = false
		case h.Transactional():
			open[h.ProducerID] = true
			lastBatch[h.ProducerID] = h
		}
	}
	for pid, o := range open {
		if _, want := m.open[pid]; o != want {
			t.Fatalf("a rescan finds producer %d's transaction open=%v, want %v", pid, o, want)
		}
	}
	for pid, s := range m.lastSeq {
		if h, ok := lastBatch[pid]; !ok || h.BaseSequence != s {
			t.Fatalf("producer %d: last batch %+v (%v), want base sequence %d", pid, h, ok, s)
		}
	}
}

// clone is a deep copy, for a test that goes on from many crash points.
func (m *txnModel) clone() *txnModel {
	c := *m
	c.compactModel = &compactModel{recs: cloneMap(m.recs), latest: cloneMap(m.latest)}
	c.aborted, c.dropped = slices.Clone(m.aborted), slices.Clone(m.dropped)
	c.open, c.commit, c.abortOff = cloneMap(m.open), cloneMap(m.commit), cloneMap(m.abortOff)
	c.seq, c.lastSeq = cloneMap(m.seq), cloneMap(m.lastSeq)
	c.pending = map[int64][]int64{}
	for k, v := range m.pending {
		c.pending[k] = slices.Clone(v)
	}
	return &c
}
