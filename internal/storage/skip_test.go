package storage

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestSkipToLeavesAGap: SkipTo moves the log end forward past offsets that
// hold nothing, from a fresh log, from one with data in its active segment
// and from one whose active segment is empty after a roll. What was there
// is kept, the gap reads as nothing, the next append gets the new end, and
// all of it survives a crash without any index found damaged on reopen.
func TestSkipToLeavesAGap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches int   // appended before SkipTo (3 records each)
		roll    bool  // SegmentBytes so small the active segment is empty after the appends
		to      int64 // SkipTo's offset
	}{
		{"fresh log", 0, false, 100},
		{"data in the active segment", 4, false, 100},
		{"empty active segment after a roll", 4, true, 100},
		{"at the end", 4, false, 12},
		{"below the end", 4, false, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			var logs bytes.Buffer
			o := testOptions(t, fs, "p")
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			if tc.roll {
				o.SegmentBytes = 1 // every append rolls first: the active segment ends empty
			}
			l := mustOpen(t, o)
			for range tc.batches {
				mustAppend(t, l, mkBatch(t, 3, 20, 1))
			}
			end := l.HighWatermark()
			if tc.roll {
				// One more append rolls, then a SkipTo from an empty active segment.
				mustAppend(t, l, mkBatch(t, 3, 20, 1))
				end = l.HighWatermark()
				if err := l.roll(); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.SkipTo(tc.to); err != nil {
				t.Fatalf("SkipTo(%d): %v", tc.to, err)
			}
			want := max(end, tc.to)
			if hw := l.HighWatermark(); hw != want {
				t.Fatalf("hw %d after SkipTo(%d) from %d, want %d", hw, tc.to, end, want)
			}
			fs.Crash()
			l2 := mustOpen(t, o)
			defer l2.Close()
			if hw := l2.HighWatermark(); hw != want {
				t.Fatalf("hw %d after crash, want %d", hw, want)
			}
			if offs := mustAppend(t, l2, mkBatch(t, 2, 20, 1)); offs[0] != want {
				t.Fatalf("append after SkipTo at %d, want %d", offs[0], want)
			}
			got := readAllBatches(t, l2, 0)
			var bases []int64
			for _, b := range got {
				h, _ := batch.ParseHeader(b)
				bases = append(bases, h.BaseOffset)
			}
			if n := len(got); n != int(end/3)+1 || bases[n-1] != want {
				t.Fatalf("batches at %v, want %d below %d and one at %d", bases, end/3, end, want)
			}
			if out := logs.String(); strings.Contains(out, "level=WARN") || strings.Contains(out, "index of a sealed segment") {
				t.Fatalf("reopen found an index that does not match its seal:\n%s", out)
			}
		})
	}
}
