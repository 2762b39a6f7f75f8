package storage

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// segmentedLog builds a log of 10 segments of 3 one-record batches each
// (offsets 0-29), batch i with timestamp base+i*1000.
func segmentedLog(t *testing.T, fs vfs.FS, clk *clock) (Options, *Log) {
	t.Helper()
	o := testOptions(t, fs, "/p")
	o.Now = clk.Now
	o.IndexIntervalBytes = 100
	o.SegmentBytes = int64(3 * len(mkBatch(t, 1, 100, 0)))
	l := mustOpen(t, o)
	base := clk.t.UnixMilli()
	for i := range 30 {
		mustAppend(t, l, mkBatch(t, 1, 100, base+int64(i)*1000))
	}
	if len(l.segs) != 10 {
		t.Fatalf("%d segments", len(l.segs))
	}
	return o, l
}

func TestRetention(t *testing.T) {
	for _, tc := range []struct {
		name      string
		time      time.Duration
		bytes     int64
		advance   time.Duration
		deleted   int
		wantStart int64
	}{
		{"nothing-configured", 0, 0, time.Hour, 0, 0},
		{"time-none-expired", time.Hour, 0, 0, 0, 0},
		{"time-some-expired", time.Minute, 0, 66 * time.Second, 2, 6}, // newest ts of segment k is 3k+2 s
		{"time-all-expired-keeps-active", time.Second, 0, 24 * time.Hour, 9, 27},
		{"size", 0, 1, 0, 9, 27},
		{"size-keeps-enough", 0, 4 * 3 * 140, 0, 6, 18},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			o, l := segmentedLog(t, vfs.NewMem(), clk)
			l.opts.RetentionTime, l.opts.RetentionBytes = tc.time, tc.bytes
			clk.t = clk.t.Add(tc.advance)
			n, err := l.ApplyRetention()
			if err != nil || n != tc.deleted {
				t.Fatalf("deleted %d (%v), want %d", n, err, tc.deleted)
			}
			if l.LogStartOffset() != tc.wantStart {
				t.Fatalf("log start %d, want %d", l.LogStartOffset(), tc.wantStart)
			}
			if tc.wantStart > 0 {
				if _, err := l.Read(tc.wantStart-1, 10); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("read of deleted offset: %v", err)
				}
			}
			checkAllReadable(t, l)
			l.Close()
			l = mustOpen(t, o)
			defer l.Close()
			if l.LogStartOffset() != tc.wantStart || l.HighWatermark() != 30 {
				t.Fatalf("after reopen start %d hw %d", l.LogStartOffset(), l.HighWatermark())
			}
		})
	}
}

func TestDeleteBelow(t *testing.T) {
	_, l := segmentedLog(t, vfs.NewMem(), newClock())
	defer l.Close()
	for _, tc := range []struct {
		offset    int64
		deleted   int
		wantStart int64
	}{
		{0, 0, 0}, {2, 0, 0}, {3, 1, 3}, {8, 1, 6}, {1000, 7, 27},
	} {
		n, err := l.DeleteBelow(tc.offset)
		if err != nil || n != tc.deleted || l.LogStartOffset() != tc.wantStart {
			t.Fatalf("DeleteBelow(%d) = %d, %v; start %d", tc.offset, n, err, l.LogStartOffset())
		}
	}
	checkAllReadable(t, l)
}

func TestTruncateSuffix(t *testing.T) {
	for _, tc := range []struct {
		name     string
		offset   int64
		wantNext int64
		segs     int
	}{
		{"beyond-end", 40, 30, 10},
		{"at-end", 30, 30, 10},
		{"last-batch", 29, 29, 10},
		{"segment-boundary", 15, 15, 5},
		{"inside-segment", 16, 16, 6},
		{"first-offset", 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mfs := vfs.NewMem()
			o, l := segmentedLog(t, mfs, newClock())
			if err := l.TruncateSuffix(tc.offset); err != nil {
				t.Fatal(err)
			}
			if l.HighWatermark() != tc.wantNext || len(l.segs) != tc.segs {
				t.Fatalf("hw %d segs %d, want %d, %d", l.HighWatermark(), len(l.segs), tc.wantNext, tc.segs)
			}
			checkAllReadable(t, l)
			b := mkBatch(t, 2, 100, 1)
			if offs := mustAppend(t, l, b); offs[0] != tc.wantNext {
				t.Fatalf("append after truncate at %d", offs[0])
			}
			checkAllReadable(t, l)
			l.Close()
			mfs.Crash() // the truncation and the append were synced
			l = mustOpen(t, o)
			defer l.Close()
			if l.HighWatermark() != tc.wantNext+2 {
				t.Fatalf("after crash hw %d, want %d", l.HighWatermark(), tc.wantNext+2)
			}
			checkAllReadable(t, l)
		})
	}
}

func TestTruncateMidBatchAndBelowStart(t *testing.T) {
	l := mustOpen(t, testOptions(t, vfs.NewMem(), "/p"))
	defer l.Close()
	mustAppend(t, l, mkBatch(t, 5, 10, 1), mkBatch(t, 5, 10, 1))
	if err := l.TruncateSuffix(7); err != nil || l.HighWatermark() != 5 {
		t.Fatalf("mid-batch truncate: hw %d, %v", l.HighWatermark(), err)
	}
	l.DeleteBelow(100) // nothing: one segment
	if err := l.TruncateSuffix(0); err != nil || l.HighWatermark() != 0 {
		t.Fatalf("truncate all: hw %d, %v", l.HighWatermark(), err)
	}
	if offs := mustAppend(t, l, mkBatch(t, 1, 10, 1)); offs[0] != 0 {
		t.Fatal(offs)
	}
}

func TestAppendEpoch(t *testing.T) {
	l := mustOpen(t, testOptions(t, vfs.NewMem(), "/p"))
	defer l.Close()
	if _, err := l.AppendEpoch(context.Background(), 42, mkBatch(t, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	b, _ := l.Read(0, 100)
	if h, _ := batch.ParseHeader(b); h.PartitionLeaderEpoch != 42 {
		t.Fatalf("epoch %d", h.PartitionLeaderEpoch)
	}
	mustAppend(t, l, mkBatch(t, 3, 1, 1))
	for _, tc := range []struct {
		offset     int64
		epoch      int32
		base, last int64
		outOfRange bool
	}{{0, 42, 0, 0, false}, {2, -1, 1, 3, false}, {4, 0, 0, 0, true}} {
		h, err := l.HeaderAt(tc.offset)
		if tc.outOfRange != errors.Is(err, ErrOffsetOutOfRange) || (!tc.outOfRange &&
			(h.PartitionLeaderEpoch != tc.epoch || h.BaseOffset != tc.base || h.LastOffset() != tc.last)) {
			t.Fatalf("HeaderAt(%d) = %+v, %v", tc.offset, h, err)
		}
	}
}

// TestCorruptSealedSegment damages a batch in the middle of a sealed segment:
// Open still works, everything before the damage is served, the damaged
// batch is quarantined (listed with its path and offsets, counted) and
// skipped, and what follows it, in its segment and later ones, is served.
func TestCorruptSealedSegment(t *testing.T) {
	mfs := vfs.NewMem()
	o, l := segmentedLog(t, mfs, newClock())
	seg := l.segs[3] // offsets 9, 10, 11
	path := seg.path(logSuffix)
	l.Close()
	data := readFile(t, mfs, path)
	size := int64(len(data)) / 3
	data[size+70] ^= 0xff // inside the batch of offset 10
	writeFile(t, mfs, path, data)

	o.Files = NewFileCache(FileCacheOptions{ScrubBytesPerSec: -1})
	l = mustOpen(t, o)
	defer l.Close()
	if b, err := l.Read(9, 1<<20); err != nil || len(b) != int(size) {
		t.Fatalf("read before the damage: %d bytes, %v", len(b), err)
	}
	b, err := l.Read(10, 1<<20)
	if h, _ := batch.ParseHeader(b); err != nil || h.BaseOffset != 11 {
		t.Fatalf("read of the damage: base %d, %v; want the batch after it", h.BaseOffset, err)
	}
	q := l.Quarantined()
	if len(q) != 1 || q[0].Segment != path || q[0].Position != size || q[0].Length != size ||
		q[0].FirstOffset != 10 || q[0].LastOffset != 10 {
		t.Fatalf("quarantined %+v", q)
	}
	if n := o.Files.Stats().CorruptBatches; n != 1 {
		t.Fatalf("%d corrupt batches counted", n)
	}
	if _, err := l.Read(12, 100); err != nil {
		t.Fatalf("read after the damaged segment: %v", err)
	}
}

// TestOpenDoesNotReadSealedSegments fails every read of a sealed segment's
// .log: Open must not notice.
func TestOpenDoesNotReadSealedSegments(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	o, l := segmentedLog(t, efs, newClock())
	active := l.active.path(logSuffix)
	l.Close()
	efs.Inject(vfs.Fault{Op: vfs.OpReadAt, Match: func(_ vfs.Op, p string) bool {
		return strings.HasSuffix(p, logSuffix) && p != active
	}})
	l = mustOpen(t, o)
	defer l.Close()
	if l.HighWatermark() != 30 || l.LogStartOffset() != 0 {
		t.Fatalf("hw %d start %d", l.HighWatermark(), l.LogStartOffset())
	}
	if efs.Fired(vfs.OpReadAt) != 0 {
		t.Fatal("Open read a sealed segment")
	}
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	b, err := readAll(testFiles, fs, path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestShortTimeIndex cuts the final entry off a sealed segment's time index:
// its newest timestamp must then come from a scan, not from the entry
// before (which would make retention delete it early).
func TestShortTimeIndex(t *testing.T) {
	clk := newClock()
	mfs := vfs.NewMem()
	o, l := segmentedLog(t, mfs, clk)
	path := l.segs[0].path(timeIndexSuffix)
	l.Close()
	b := readFile(t, mfs, path)
	if len(b) < 2*timeEntrySize {
		t.Fatalf("time index of %d bytes", len(b))
	}
	writeFile(t, mfs, path, b[:len(b)-timeEntrySize])
	l = mustOpen(t, o)
	defer l.Close()
	clk.t = clk.t.Add(61500 * time.Millisecond) // cutoff: 1.5 s after the first batch
	l.opts.RetentionTime = time.Minute
	if n, err := l.ApplyRetention(); err != nil || n != 0 {
		t.Fatalf("deleted %d (%v): segment 0 holds a batch at 2 s", n, err)
	}
	clk.t = clk.t.Add(time.Second)
	if n, err := l.ApplyRetention(); err != nil || n != 1 {
		t.Fatalf("deleted %d (%v), want 1", n, err)
	}
}

// TestTruncateWithPendingAppends: batches placed but not yet synced when
// TruncateSuffix runs are acknowledged if the cut keeps them and fail with
// ErrTruncated if it removes them.
func TestTruncateWithPendingAppends(t *testing.T) {
	l := mustOpen(t, testOptions(t, vfs.NewMem(), "/p"))
	defer l.Close()
	mustAppend(t, l, mkBatch(t, 2, 10, 1))
	place := func() (int64, int64, chan struct{}) { // as Append does, without kicking the syncer
		l.wmu.Lock()
		defer l.wmu.Unlock()
		_, end, gen, err := l.writeLocked([][]byte{mkBatch(t, 2, 10, 1)}, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		return end, gen, l.pend.done
	}
	endA, genA, doneA := place()
	endB, genB, doneB := place()
	if err := l.TruncateSuffix(endA); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang fails, not blocks CI
	defer cancel()
	if err := l.waitDurable(ctx, endA, genA, doneA, false); err != nil {
		t.Fatalf("kept batch: %v", err)
	}
	if err := l.waitDurable(ctx, endB, genB, doneB, false); !errors.Is(err, ErrTruncated) {
		t.Fatalf("removed batch: %v", err)
	}
	if l.HighWatermark() != endA {
		t.Fatalf("hw %d, want %d", l.HighWatermark(), endA)
	}
}

// TestRecoveryKeepsMaxTimestamp loses the active segment's time index
// (crash) while its offset index survives: the segment's newest timestamp,
// carried by its first batch, must still be known after recovery.
func TestRecoveryKeepsMaxTimestamp(t *testing.T) {
	mfs := vfs.NewMem()
	o := testOptions(t, mfs, "/p")
	o.IndexIntervalBytes = 100
	l := mustOpen(t, o)
	for i := range 20 {
		mustAppend(t, l, mkBatch(t, 1, 100, int64(10000-i))) // newest first
	}
	path := l.active.path(timeIndexSuffix)
	l.Close()
	for _, cut := range []int{1, 3, 100} {
		b := readFile(t, mfs, path)
		writeFile(t, mfs, path, b[:max(0, len(b)-cut*timeEntrySize)])
		l = mustOpen(t, o)
		if got := l.active.maxTimestamp(); got != 10000 {
			t.Fatalf("cut %d entries: max timestamp %d, want 10000", cut, got)
		}
		checkAllReadable(t, l)
		l.Close()
	}
}
