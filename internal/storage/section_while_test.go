package storage

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestReadSectionWhile: the section ends before the first batch keep
// refuses (here: batches of 3 records), within maxBytes and the segment;
// a refused batch at the offset gives an empty, stopped section; and the
// bytes are exactly those Read returns for the same span.
func TestReadSectionWhile(t *testing.T) {
	o := testOptions(t, vfs.NewMem(), "/p")
	o.SegmentBytes = 1 << 20
	o.IndexIntervalBytes = 100 // the index must not let the walk skip a refused batch
	l := mustOpen(t, o)
	defer l.Close()
	one, three := mkBatch(t, 1, 10, 1), mkBatch(t, 3, 10, 2)
	// Offsets: 0 | 1 | 2-4 (refused) | 5 | 6 | 7-9 (refused) | 10
	for _, b := range [][]byte{one, one, three, one, one, three, one} {
		mustAppend(t, l, b)
	}
	keep := func(h batch.Header) bool { return h.RecordCount != 3 }
	for _, tc := range []struct {
		name     string
		offset   int64
		maxBytes int
		batches  int // whole batches in the section
		stopped  bool
		err      error
	}{
		{"cut-before-refused", 0, 1 << 20, 2, true, nil},
		{"max-bytes-first", 0, len(one) + 1, 1, false, nil},
		{"first-refused", 2, 1 << 20, 0, true, nil},
		{"inside-refused", 3, 1 << 20, 0, true, nil},
		{"after-refused", 5, 1 << 20, 2, true, nil},
		{"tiny-max-still-one", 5, 1, 1, false, nil},
		{"last", 10, 1 << 20, 1, false, nil},
		{"at-hw", 11, 1 << 20, 0, false, nil},
		{"past-hw", 12, 1 << 20, 0, false, ErrOffsetOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, stopped, err := l.ReadSectionWhile(tc.offset, tc.maxBytes, keep)
			if !errors.Is(err, tc.err) || stopped != tc.stopped {
				t.Fatalf("stopped %v, err %v; want %v, %v", stopped, err, tc.stopped, tc.err)
			}
			var buf bytes.Buffer
			if _, err := s.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			n := 0
			for rest := got; len(rest) > 0; n++ {
				size, err := batch.FrameSize(rest)
				if err != nil || size > int64(len(rest)) || batch.Validate(rest[:size], 0) != nil {
					t.Fatalf("partial or bad batch %d in the section", n)
				}
				if h, _ := batch.ParseHeader(rest); !keep(h) {
					t.Fatalf("batch %d is one keep refuses", n)
				}
				rest = rest[size:]
			}
			if n != tc.batches {
				t.Fatalf("%d batches, want %d", n, tc.batches)
			}
			if direct, _ := l.Read(tc.offset, len(got)); len(got) > 0 && !bytes.Equal(got, direct) {
				t.Fatalf("section (%d bytes) differs from Read of as many (%d bytes)", len(got), len(direct))
			}
		})
	}
}
