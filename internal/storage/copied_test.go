package storage

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestAppendCopied: a cleaned log's batches (fewer records than offsets, or none) and the
// empty batches filling its gaps are appended whole by AppendCopied, each keeping its span
// of offsets and its leader epoch, read back byte for byte, and found again after a
// reopen (recovery's exact offset checks hold: the copy has no gap). Append still refuses
// them, and AppendCopied refuses a damaged one.
func TestAppendCopied(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, testOptions(t, fs, "/p"))
	full := mkBatch(t, 10, 8, 1000)
	var recs []batch.Record
	for r, err := range batch.Records(full) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	h, _ := batch.ParseHeader(full)
	h.PartitionLeaderEpoch = 4
	cleaned := batch.Rebuild(h, []batch.Record{recs[2], recs[9]}) // offsets 0..9, two records kept
	emptied := batch.Rebuild(h, nil)
	batch.SetBaseOffset(emptied, 10)
	fill := batch.Fillers(20, 35, 4, 1009)
	tail := mkBatch(t, 3, 8, 1010)
	batch.SetBaseOffset(tail, 35)
	in := append([][]byte{cleaned, emptied}, append(fill, tail)...)
	if _, err := l.Append(context.Background(), cleaned); err == nil {
		t.Fatal("Append took a batch with fewer records than offsets")
	}
	offs, err := l.AppendCopied(context.Background(), in...)
	if err != nil {
		t.Fatal(err)
	}
	if offs[0] != 0 || offs[1] != 10 || offs[2] != 20 || offs[len(offs)-1] != 35 || l.HighWatermark() != 38 {
		t.Fatalf("offsets %v, high watermark %d", offs, l.HighWatermark())
	}
	check := func(l *Log) {
		t.Helper()
		got := readAllBatches(t, l, 0)
		if len(got) != len(in) {
			t.Fatalf("%d batches read, %d appended", len(got), len(in))
		}
		for i := range in {
			if string(got[i]) != string(in[i]) {
				t.Fatalf("batch %d read back changed", i)
			}
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, testOptions(t, fs, "/p"))
	defer l.Close()
	check(l)
	bad := append([]byte(nil), tail...)
	bad[len(bad)-1] ^= 1
	if _, err := l.AppendCopied(context.Background(), bad); !errors.Is(err, batch.ErrCorrupt) {
		t.Fatalf("a damaged copied batch: %v, want ErrCorrupt", err)
	}
}
