package storage

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// kv is one record a compaction test writes: a nil value is a tombstone.
type kv struct {
	key   string
	value []byte
}

// written is a record as the model remembers it.
type written struct {
	key   string
	value []byte
	ts    int64
}

// compactModel is the reference the cleaner is checked against: every
// record ever written, by offset, and the latest offset of each key.
type compactModel struct {
	recs   map[int64]written
	latest map[string]int64
}

func newCompactModel() *compactModel {
	return &compactModel{recs: map[int64]written{}, latest: map[string]int64{}}
}

// appendKVs appends one batch (with producer p if not nil) and records it.
func (m *compactModel) appendKVs(t testing.TB, l *Log, ts int64, p *batch.Producer, recs ...kv) int64 {
	t.Helper()
	rs := make([]batch.Record, len(recs))
	for i, r := range recs {
		rs[i] = batch.Record{Timestamp: ts, Key: []byte(r.key), Value: r.value}
	}
	b, err := batch.Build(rs, batch.Options{LeaderEpoch: -1, Producer: p})
	if err != nil {
		t.Fatal(err)
	}
	base := mustAppend(t, l, b)[0]
	for i, r := range recs {
		m.recs[base+int64(i)] = written{key: r.key, value: r.value, ts: ts}
		m.latest[r.key] = base + int64(i)
	}
	return base
}

// stored is a record read back from the log.
type stored struct {
	off   int64
	key   string
	value []byte
}

// readRecords reads every record from the log start, checking that
// offsets increase. A read that returns nothing below the high watermark
// is a gap through to it (the cleaner removed the last records before an
// empty active segment), which a consumer waits at.
func readRecords(t testing.TB, l *Log) []stored {
	t.Helper()
	var out []stored
	last := int64(-1)
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
			for r, err := range batch.Records(b[:h.Size()]) {
				if err != nil {
					t.Fatal(err)
				}
				if r.Offset <= last {
					t.Fatalf("offset %d after %d", r.Offset, last)
				}
				last = r.Offset
				out = append(out, stored{off: r.Offset, key: string(r.Key), value: r.Value})
			}
			b, off = b[h.Size():], h.NextOffset()
		}
	}
	if q := l.Quarantined(); len(q) != 0 {
		t.Fatalf("good batches quarantined: %+v", q)
	}
	return out
}

// check verifies what a consumer from the beginning sees against the
// model: every record is one that was written at that offset; the latest
// record of every key is there unless it is a tombstone (which may have
// been dropped); no key appears before its latest offset inside the
// segments the cleaner has rewritten (below cleanEnd) when full is set.
func (m *compactModel) check(t testing.TB, l *Log, cleanEnd int64, full bool) []stored {
	t.Helper()
	got := readRecords(t, l)
	seen := map[int64]bool{}
	for _, r := range got {
		w, ok := m.recs[r.off]
		if !ok || w.key != r.key || string(w.value) != string(r.value) || (w.value == nil) != (r.value == nil) {
			t.Fatalf("offset %d holds %q=%q, written %q=%q (%v)", r.off, r.key, r.value, w.key, w.value, ok)
		}
		seen[r.off] = true
		if full && r.off < cleanEnd && m.latest[r.key] < cleanEnd && m.latest[r.key] != r.off {
			t.Fatalf("offset %d: key %q superseded at %d but kept below the cleaned end %d", r.off, r.key, m.latest[r.key], cleanEnd)
		}
	}
	for k, off := range m.latest {
		if !seen[off] && m.recs[off].value != nil {
			t.Fatalf("latest record of %q (offset %d) lost", k, off)
		}
	}
	return got
}

// cleanedEnd is where the last segment carrying a marker is clean to.
func cleanedEnd(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	end := int64(0)
	for _, s := range l.segs {
		if s.gapped {
			end = s.mark.cleanedTo
		}
	}
	return end
}

// randomUpdates writes n records over keys keys, a tomb fraction of them
// tombstones, in batches of 1-8, advancing the clock 1ms a batch.
func (m *compactModel) randomUpdates(t testing.TB, l *Log, c *clock, rng *rand.Rand, n, keys int, tomb float64) {
	t.Helper()
	for n > 0 {
		k := min(n, 1+rng.IntN(8))
		recs := make([]kv, k)
		for i := range recs {
			key := fmt.Sprintf("key-%05d", rng.IntN(keys))
			val := []byte(fmt.Sprintf("v%d-%s", rng.Int64(), key))
			if rng.Float64() < tomb {
				val = nil
			}
			recs[i] = kv{key, val}
		}
		m.appendKVs(t, l, c.t.UnixMilli(), nil, recs...)
		c.t = c.t.Add(time.Millisecond)
		n -= k
	}
}

func mustClean(t testing.TB, l *Log, o CleanOptions) CleanStats {
	t.Helper()
	st, err := l.Clean(o)
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	return st
}

// forceRoll seals the active segment, as a roll by size would.
func forceRoll(t testing.TB, l *Log) {
	t.Helper()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
}
