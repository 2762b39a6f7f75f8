package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

func TestAppendReadReopen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy SyncPolicy
		seg    int64
	}{
		{"always", SyncPolicy{Mode: SyncAlways}, 0},
		{"never", SyncPolicy{Mode: SyncNever}, 0},
		{"interval", SyncPolicy{Mode: SyncInterval, Interval: 1 << 40}, 0},
		{"small-segments", SyncPolicy{Mode: SyncAlways}, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(t, vfs.Default, dir)
			o.Sync, o.SegmentBytes, o.IndexIntervalBytes = tc.policy, tc.seg, 300
			l := mustOpen(t, o)
			var sent [][]byte
			var bases []int64
			next := int64(0)
			for i := range 50 {
				b := mkBatch(t, 1+i%4, 50, int64(1000+i*10))
				offs := mustAppend(t, l, b)
				if offs[0] != next {
					t.Fatalf("append %d: base %d, want %d", i, offs[0], next)
				}
				h, _ := batch.ParseHeader(b)
				next += int64(h.LastOffsetDelta) + 1
				sent, bases = append(sent, b), append(bases, offs[0])
			}
			if hw := l.HighWatermark(); hw != next {
				t.Fatalf("hw %d, want %d", hw, next)
			}
			check := func(l *Log) {
				got := readAllBatches(t, l, 0)
				if len(got) != len(sent) {
					t.Fatalf("read %d batches, want %d", len(got), len(sent))
				}
				for i := range got {
					if !sameBatch(got[i], sent[i], bases[i]) {
						t.Fatalf("batch %d differs", i)
					}
				}
				// Reading from the middle of a batch starts at that batch.
				b, err := l.Read(bases[10]+1, 1)
				if err != nil || !sameBatch(b, sent[10], bases[10]) && len(sent[10]) > 0 && bases[11] > bases[10]+1 {
					h, _ := batch.ParseHeader(b)
					t.Fatalf("Read mid-batch: base %d err %v", h.BaseOffset, err)
				}
			}
			check(l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, o)
			defer l.Close()
			if l.HighWatermark() != next {
				t.Fatalf("after reopen hw %d, want %d", l.HighWatermark(), next)
			}
			check(l)
			if _, err := l.Read(next+1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read past hw: %v", err)
			}
			if b, err := l.Read(next, 100); err != nil || len(b) != 0 {
				t.Fatalf("read at hw: %d bytes, %v", len(b), err)
			}
			offs := mustAppend(t, l, sent[0])
			if offs[0] != next {
				t.Fatalf("append after reopen at %d, want %d", offs[0], next)
			}
		})
	}
}

func TestAppendRejectsBadBatches(t *testing.T) {
	good := func() []byte { return mkBatch(t, 2, 10, 1) }
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
		want error
	}{
		{"bad-crc", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, batch.ErrCorrupt},
		{"bad-magic", func(b []byte) []byte { b[16] = 1; return b }, batch.ErrBadMagic},
		{"short", func(b []byte) []byte { return b[:len(b)-1] }, batch.ErrCorrupt},
		{"too-large", func([]byte) []byte { return mkBatch(t, 1, 5000, 1) }, batch.ErrTooLarge},
		{"empty", func([]byte) []byte { return nil }, batch.ErrCorrupt},
		{"offset-gap", func(b []byte) []byte { return withCounts(b, 2, 5) }, batch.ErrCorrupt},
		{"no-records", func(b []byte) []byte { return withCounts(mkBatch(t, 1, 0, 1)[:batch.HeaderSize], 0, 0) }, batch.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t, vfs.Default, t.TempDir())
			o.MaxBatchBytes = 4096
			l := mustOpen(t, o)
			defer l.Close()
			_, err := l.Append(context.Background(), good(), tc.mut(good()))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if l.HighWatermark() != 0 || l.active.size.Load() != 0 {
				t.Fatal("something was written")
			}
		})
	}
}

func TestSyncPolicyParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SyncPolicy
		err  bool
	}{
		{"always", SyncPolicy{Mode: SyncAlways}, false},
		{"", SyncPolicy{Mode: SyncAlways}, false},
		{"never", SyncPolicy{Mode: SyncNever}, false},
		{"250ms", SyncPolicy{Mode: SyncInterval, Interval: 250e6}, false},
		{"interval=1s", SyncPolicy{Mode: SyncInterval, Interval: 1e9}, false},
		{"-1s", SyncPolicy{}, true},
		{"sometimes", SyncPolicy{}, true},
	} {
		got, err := ParseSyncPolicy(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseSyncPolicy(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// withCounts rewrites a batch's recordCount and lastOffsetDelta (records
// untouched) and fixes its length and CRC, so only those fields are wrong.
func withCounts(b []byte, count, lastDelta int32) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-batch.LengthSize))
	binary.BigEndian.PutUint32(b[23:], uint32(lastDelta))
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	binary.BigEndian.PutUint32(b[17:], batch.ComputeCRC(b))
	return b
}

// TestSetSegmentBytes: a smaller segment size takes effect at the next
// append (the active segment rolls when the append would pass it), a
// larger one lets segments grow again; nonsense is refused.
func TestSetSegmentBytes(t *testing.T) {
	o := testOptions(t, vfs.NewMem(), "/p")
	o.SegmentBytes = 1 << 20
	l := mustOpen(t, o)
	defer l.Close()
	b := mkBatch(t, 4, 100, 0) // ~500 bytes
	segs := func() int {
		l.mu.RLock()
		defer l.mu.RUnlock()
		return len(l.segs)
	}
	for range 10 {
		mustAppend(t, l, b)
	}
	if n := segs(); n != 1 {
		t.Fatalf("%d segments with 1 MiB segments, want 1", n)
	}
	if err := l.SetSegmentBytes(int64(2 * len(b))); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		mustAppend(t, l, b)
	}
	if n := segs(); n != 6 {
		t.Fatalf("%d segments after 10 appends with room for 2 batches a segment, want 6", n)
	}
	for _, bad := range []int64{0, -1, 1 << 31} {
		if err := l.SetSegmentBytes(bad); err == nil {
			t.Errorf("SetSegmentBytes(%d) accepted", bad)
		}
	}
}
