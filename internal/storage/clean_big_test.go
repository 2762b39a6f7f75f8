package storage

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/testrace"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestCleanManyUpdates is the test at the size, in CI:
// 1,000,000 updates over 10,000 keys (about 2 s without -race, so it runs
// only without it), a tenth of the keys deleted at the end. After
// cleaning, a consumer from the beginning sees exactly the latest value of
// each live key once, with the tombstones too until delete.retention.ms
// has passed on the injected clock and not after, offsets increasing with
// gaps, and the log shrunk to about the live set.
func TestCleanManyUpdates(t *testing.T) {
	testrace.NotUnderRace(t)
	updates, keys := 1_000_000, 10_000
	// A map that holds every key: one pass.
	cleanManyUpdates(t, updates, keys, int64(keys)*4*mapSlotBytes)
}

// TestCleanManyUpdatesSmallMap is the same with a map of fewer keys than
// the log has (512 slots, 90 % usable, for 600 keys): it fills inside a
// segment, and passes go on from there until the log is clean.
func TestCleanManyUpdatesSmallMap(t *testing.T) {
	cleanManyUpdates(t, 10_000, 600, 512*mapSlotBytes)
}

func cleanManyUpdates(t *testing.T, updates, keys int, buffer int64) {
	c := newClock()
	o := testOptions(t, vfs.Default, t.TempDir())
	o.Now, o.SegmentBytes, o.Sync = c.Now, int64(min(1<<20, updates*8)), SyncPolicy{Mode: SyncNever}
	l := mustOpen(t, o)
	defer l.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	latest := map[string]string{}
	value := func(k string, i int) string { return fmt.Sprintf("%s=%d-%032x", k, i, rng.Uint64()) }
	var sent int64
	for i := 0; i < updates; {
		recs := make([]batch.Record, 100)
		for j := range recs {
			k := fmt.Sprintf("key-%05d", rng.IntN(keys))
			v := value(k, i)
			latest[k] = v
			recs[j] = batch.Record{Timestamp: c.t.UnixMilli(), Key: []byte(k), Value: []byte(v)}
			i++
		}
		b, err := batch.Build(recs, batch.Options{LeaderEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		sent += int64(len(b))
		mustAppend(t, l, b)
		c.t = c.t.Add(time.Millisecond)
	}
	var tombs []batch.Record
	for k := range latest {
		if len(tombs) < keys/10 {
			tombs = append(tombs, batch.Record{Timestamp: c.t.UnixMilli(), Key: []byte(k)})
			delete(latest, k)
		}
	}
	b, _ := batch.Build(tombs, batch.Options{LeaderEpoch: -1})
	mustAppend(t, l, b)
	forceRoll(t, l)
	live := int64(0)
	for k, v := range latest {
		live += int64(len(k) + len(v) + 8)
	}

	o2 := CleanOptions{DeleteRetention: 24 * time.Hour, BufferBytes: buffer}
	start := time.Now()
	st := mustClean(t, l, o2)
	for st.Cleaned { // a map smaller than the log takes several passes
		st = mustClean(t, l, o2)
	}
	t.Logf("%d updates over %d keys: %d bytes sent, cleaned in %v to %d bytes (live set about %d)",
		updates, keys, sent, time.Since(start).Round(time.Millisecond), l.Size(), live)
	check := func(withTombs bool) {
		t.Helper()
		seen, tombsSeen, last := map[string]bool{}, 0, int64(-1)
		gaps := 0
		for off := int64(0); off < l.HighWatermark(); {
			buf, err := l.Read(off, 1<<20)
			if err != nil || len(buf) == 0 {
				break
			}
			for len(buf) > 0 {
				h, _ := batch.ParseHeader(buf)
				for r, err := range batch.Records(buf[:h.Size()]) {
					if err != nil {
						t.Fatal(err)
					}
					if r.Offset <= last {
						t.Fatalf("offset %d after %d", r.Offset, last)
					}
					if r.Offset > last+1 {
						gaps++
					}
					last = r.Offset
					k := string(r.Key)
					if seen[k] {
						t.Fatalf("key %s seen twice", k)
					}
					seen[k] = true
					if r.Value == nil {
						tombsSeen++
						continue
					}
					if latest[k] != string(r.Value) {
						t.Fatalf("key %s: %q, latest %q", k, r.Value, latest[k])
					}
				}
				buf, off = buf[h.Size():], h.NextOffset()
			}
		}
		for k := range latest {
			if !seen[k] {
				t.Fatalf("live key %s missing", k)
			}
		}
		if want := map[bool]int{true: len(tombs), false: 0}[withTombs]; tombsSeen != want {
			t.Fatalf("%d tombstones seen, want %d", tombsSeen, want)
		}
		if gaps == 0 {
			t.Fatal("no gaps in the offsets")
		}
	}
	check(true)
	if size := l.Size(); size > 2*live+int64(keys)*64 {
		t.Fatalf("log of %d bytes after cleaning, live set about %d", size, live)
	}
	c.t = c.t.Add(23 * time.Hour)
	mustClean(t, l, o2)
	check(true)
	c.t = c.t.Add(2 * time.Hour)
	if st := mustClean(t, l, o2); st.TombstonesRemoved != int64(len(tombs)) {
		t.Fatalf("removed %d tombstones, want %d", st.TombstonesRemoved, len(tombs))
	}
	check(false)
}

// TestCleanKeepsProducerState: batches keep their producer id, epoch and
// sequence range; a producer's last batch stays even when every record in
// it is superseded (empty), its earlier emptied batches go.
func TestCleanKeepsProducerState(t *testing.T) {
	c := newClock()
	l := mustOpen(t, compactOptions(t, c))
	defer l.Close()
	m := newCompactModel()
	p := &batch.Producer{ID: 7, Epoch: 2, BaseSequence: 0}
	for i := range 5 {
		p.BaseSequence = int32(2 * i)
		m.appendKVs(t, l, c.t.UnixMilli(), p, kv{"a", []byte{byte(i)}}, kv{"b", []byte{byte(i)}})
	}
	m.appendKVs(t, l, c.t.UnixMilli(), nil, kv{"a", []byte("x")}, kv{"b", []byte("y")})
	forceRoll(t, l)
	mustClean(t, l, CleanOptions{})
	var hs []batch.Header
	for _, b := range readAllBatches(t, l, 0) {
		h, _ := batch.ParseHeader(b)
		hs = append(hs, h)
	}
	if len(hs) != 2 {
		t.Fatalf("batches %+v, want the producer's last (empty) and the last", hs)
	}
	if h := hs[0]; h.BaseOffset != 8 || h.RecordCount != 0 || h.LastOffsetDelta != 1 || h.ProducerID != 7 || h.ProducerEpoch != 2 || h.BaseSequence != 8 {
		t.Fatalf("producer's last batch %+v, want base 8, empty, delta 1, producer 7/2 seq 8", h)
	}
	m.check(t, l, cleanedEnd(l), true)
}
