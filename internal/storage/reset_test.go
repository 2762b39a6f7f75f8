package storage

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestResetRestartsAnywhere: Reset empties a log of several segments and
// restarts it at an offset past its end (a Raft snapshot installed ahead of
// the log) or before it; the new start survives a crash, no removed batch
// comes back, and appends go on from there.
func TestResetRestartsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64
	}{{"past the end", 1000}, {"inside", 3}, {"at zero", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			o := testOptions(t, fs, "p")
			o.SegmentBytes = 200 // a few batches per segment: several segments
			l := mustOpen(t, o)
			for range 10 {
				mustAppend(t, l, mkBatch(t, 1, 50, 1))
			}
			if bases, _ := l.SegmentSizes(); len(bases) < 3 {
				t.Fatalf("want several segments, got %v", bases)
			}
			if err := l.Reset(tc.at); err != nil {
				t.Fatal(err)
			}
			if l.LogStartOffset() != tc.at || l.HighWatermark() != tc.at {
				t.Fatalf("after Reset(%d): start %d hw %d", tc.at, l.LogStartOffset(), l.HighWatermark())
			}
			fs.Crash()
			l2 := mustOpen(t, o)
			defer l2.Close()
			if l2.LogStartOffset() != tc.at || l2.HighWatermark() != tc.at {
				t.Fatalf("after crash: start %d hw %d, want %d", l2.LogStartOffset(), l2.HighWatermark(), tc.at)
			}
			if offs := mustAppend(t, l2, mkBatch(t, 2, 10, 1)); offs[0] != tc.at {
				t.Fatalf("append after reset at %d, want %d", offs[0], tc.at)
			}
			if got := readAllBatches(t, l2, tc.at); len(got) != 1 {
				t.Fatalf("read %d batches, want 1", len(got))
			}
		})
	}
}
