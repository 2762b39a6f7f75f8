package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// crashModel remembers every batch ever offered to the log, by a unique id
// carried in its first record's key, and which ones must survive a crash.
type crashModel struct {
	mu      sync.Mutex
	sent    map[uint64][]byte // id -> bytes as appended
	acked   map[int64]uint64  // base offset -> id, for acknowledged durable batches
	pending map[int64]uint64  // acked under SyncNever, durable after the next Sync
	nextID  uint64
}

func newCrashModel() *crashModel {
	return &crashModel{sent: map[uint64][]byte{}, acked: map[int64]uint64{}, pending: map[int64]uint64{}}
}

// newBatch builds a unique batch of 1-4 records of random sizes.
func (m *crashModel) newBatch(t testing.TB, rng *rand.Rand) (uint64, []byte) {
	m.mu.Lock()
	m.nextID++
	id := m.nextID
	m.mu.Unlock()
	n := 1 + rng.IntN(4)
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{Timestamp: int64(id), Value: bytes.Repeat([]byte{byte(id)}, rng.IntN(300))}
	}
	recs[0].Key = binary.BigEndian.AppendUint64(nil, id)
	b, err := batch.Build(recs, batch.Options{LeaderEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.sent[id] = b
	m.mu.Unlock()
	return id, b
}

func (m *crashModel) ack(durable bool, offs []int64, ids []uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, o := range offs {
		if durable {
			m.acked[o] = ids[i]
		} else {
			m.pending[o] = ids[i]
		}
	}
}

// truncate forgets acknowledged batches that TruncateSuffix(off) removes.
func (m *crashModel) truncate(off int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for o, id := range m.acked {
		h, _ := batch.ParseHeader(m.sent[id])
		if o+int64(h.LastOffsetDelta) >= off {
			delete(m.acked, o)
		}
	}
}

// forgetBelow drops acknowledged batches that retention deleted.
func (m *crashModel) forgetBelow(start int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, set := range []map[int64]uint64{m.acked, m.pending} {
		for o := range set {
			if o < start {
				delete(set, o)
			}
		}
	}
}

// synced: everything acknowledged so far is durable.
func (m *crashModel) synced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for o, id := range m.pending {
		m.acked[o] = id
	}
	clear(m.pending)
}

// verify reads the reopened log: every batch must be whole, contiguous, and
// byte for byte one that was sent; every durable acknowledged batch must be
// there at its offset. What survives becomes the new durable truth.
func (m *crashModel) verify(t testing.TB, l *Log, what string) {
	t.Helper()
	seen := map[int64]uint64{}
	want := l.LogStartOffset()
	for _, b := range readAllBatches(t, l, want) {
		h, _ := batch.ParseHeader(b)
		if h.BaseOffset != want {
			t.Fatalf("%s: batch at %d, want %d (gap)", what, h.BaseOffset, want)
		}
		var id uint64
		for r, err := range batch.Records(b) {
			if err != nil || len(r.Key) != 8 {
				t.Fatalf("%s: batch at %d unreadable: %v", what, h.BaseOffset, err)
			}
			id = binary.BigEndian.Uint64(r.Key)
			break
		}
		sent, ok := m.sent[id]
		if !ok || !bytes.Equal(sent[8:], b[8:]) {
			t.Fatalf("%s: batch at %d (id %d) differs from what was sent", what, h.BaseOffset, id)
		}
		seen[h.BaseOffset] = id
		want = h.NextOffset()
	}
	checkMaxTimestamps(t, l, what)
	for o, id := range m.acked {
		if seen[o] != id {
			t.Fatalf("%s: acknowledged batch id %d at offset %d lost (found id %d)", what, id, o, seen[o])
		}
	}
	m.acked, m.pending = seen, map[int64]uint64{}
}

// TestCrashSimulation runs thousands of random append/sync/truncate/crash
// sequences on the crashable MemFS, with concurrent appenders, torn writes
// and tiny segments, and checks after every reopen that every acknowledged
// batch reads back byte for byte and nothing partial is visible.
var debugSeed = -1

func TestCrashSimulation(t *testing.T) {
	iterations := 1000 // each runs 1-3 sequences ending in a crash
	if testing.Short() {
		iterations = 100
	}
	if n, err := strconv.Atoi(os.Getenv("SLUICE_CRASH_ITERATIONS")); err == nil {
		iterations = n // longer soaks
	}
	for it := range iterations {
		seed := uint64(it)
		if debugSeed >= 0 && it != debugSeed {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		mfs := vfs.NewMem()
		o := Options{FS: mfs, Dir: "/data/p0", Logger: quiet, Now: newClock().Now,
			SegmentBytes:       int64(512 + rng.IntN(4096)),
			IndexIntervalBytes: 32 + rng.IntN(1024),
		}
		if rng.IntN(3) == 0 {
			o.Sync = SyncPolicy{Mode: SyncNever}
		}
		m := newCrashModel()
		for cycle := range 1 + rng.IntN(3) {
			what := fmt.Sprintf("seed %d cycle %d (%v)", seed, cycle, o.Sync)
			l, err := Open(o)
			if err != nil {
				t.Fatalf("%s: Open: %v", what, err)
			}
			if debugSeed >= 0 {
				for _, s := range l.segs {
					t.Logf("%s seg base %d size %d", what, s.base, s.size.Load())
				}
			}
			m.verify(t, l, what+" after open")
			var inflight sync.WaitGroup
			runCrashCycle(t, what, rng, l, m, o.Sync.Mode == SyncAlways, &inflight)
			switch rng.IntN(5) {
			case 0: // a clean shutdown: everything acknowledged stays
				inflight.Wait()
				if err := l.Close(); err != nil {
					t.Fatalf("%s: Close: %v", what, err)
				}
				m.synced()
				continue
			case 1, 2:
				mfs.CrashWithTornWrites(rng)
			default:
				mfs.Crash()
			}
			l.Close() // fails: its files died in the crash
			inflight.Wait()
		}
	}
}

// runCrashCycle does random operations, sometimes leaving concurrent
// appends in flight when it returns (the crash then cuts them).
func runCrashCycle(t testing.TB, what string, rng *rand.Rand, l *Log, m *crashModel, always bool, inflight *sync.WaitGroup) {
	ctx := context.Background()
	for range rng.IntN(25) {
		switch op := rng.IntN(20); {
		case op < 14:
			k := 1 + rng.IntN(3)
			ids, bs := make([]uint64, k), make([][]byte, k)
			for i := range k {
				ids[i], bs[i] = m.newBatch(t, rng)
			}
			offs, err := l.Append(ctx, bs...)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			m.ack(always, offs, ids)
		case op < 17:
			if err := l.Sync(); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			m.synced()
		case op < 18 && l.HighWatermark() > l.LogStartOffset():
			inflight.Wait()
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			m.synced()
			off := l.LogStartOffset() + rng.Int64N(l.HighWatermark()-l.LogStartOffset())
			if err := l.TruncateSuffix(off); err != nil {
				t.Fatalf("TruncateSuffix(%d): %v", off, err)
			}
			m.truncate(off)
			m.verify(t, l, fmt.Sprintf("%s: after TruncateSuffix(%d)", what, off))
		case op < 19:
			inflight.Wait()
			if _, err := l.DeleteBelow(l.LogStartOffset() + rng.Int64N(l.HighWatermark()-l.LogStartOffset()+1)); err != nil {
				t.Fatalf("DeleteBelow: %v", err)
			}
			m.forgetBelow(l.LogStartOffset())
			if debugSeed >= 0 {
				t.Logf("DeleteBelow -> start %d hw %d", l.LogStartOffset(), l.HighWatermark())
			}
		default:
			concurrentAppends(t, rng, l, m, always, inflight)
		}
	}
}

// concurrentAppends starts a few appenders and returns while some may still
// be running; they stop on their own once the crash fails their writes.
func concurrentAppends(t testing.TB, rng *rand.Rand, l *Log, m *crashModel, always bool, wg *sync.WaitGroup) {
	for g := range 4 {
		n := rng.IntN(6)
		batches := make([][]byte, n)
		ids := make([]uint64, n)
		for i := range n {
			ids[i], batches[i] = m.newBatch(t, rng)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, b := range batches {
				offs, err := l.Append(context.Background(), b)
				if err != nil {
					return
				}
				m.ack(always, offs, ids[i:i+1])
			}
		}()
		if g == 0 && rng.IntN(2) == 0 {
			break // leave the rest unstarted, the first one in flight
		}
	}
	if rng.IntN(2) == 0 {
		wg.Wait()
	}
}

// checkMaxTimestamps compares each segment's newest timestamp, as its index
// knows it, with the batches it holds: retention by time depends on it.
func checkMaxTimestamps(t testing.TB, l *Log, what string) {
	t.Helper()
	for _, s := range l.segs {
		want := int64(-1)
		for off := s.base; off < l.HighWatermark(); {
			b, err := l.Read(off, 1)
			if err != nil || len(b) == 0 {
				break
			}
			h, _ := batch.ParseHeader(b)
			if h.BaseOffset < s.base || (s != l.active && h.BaseOffset >= s.sealedNext) {
				break
			}
			want = max(want, h.MaxTimestamp)
			off = h.NextOffset()
		}
		if got := s.maxTimestamp(); got != want {
			t.Fatalf("%s: segment %d max timestamp %d, batches say %d", what, s.base, got, want)
		}
	}
}
