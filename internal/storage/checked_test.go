package storage

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestCheckThenAppendChecked: Check refuses what Append refuses and writes
// nothing; what it accepts AppendChecked writes as AppendEpoch would (the
// epoch stamped, consecutive offsets, a slice of a checked run still
// appendable); and a run checked by another log, whose limits may differ,
// is refused.
func TestCheckThenAppendChecked(t *testing.T) {
	o := testOptions(t, vfs.NewMem(), "/a")
	o.MaxBatchBytes = 4096
	a := mustOpen(t, o)
	defer a.Close()
	ob := testOptions(t, vfs.NewMem(), "/b")
	b := mustOpen(t, ob)
	defer b.Close()
	ctx := context.Background()

	bad := mkBatch(t, 2, 10, 1)
	bad[len(bad)-1] ^= 1
	if _, err := a.Check(mkBatch(t, 1, 10, 1), bad); !errors.Is(err, batch.ErrCorrupt) {
		t.Fatalf("Check of a bad CRC: %v", err)
	}
	if _, err := a.Check(mkBatch(t, 1, 5000, 1)); !errors.Is(err, batch.ErrTooLarge) {
		t.Fatalf("Check over the log's limit: %v", err)
	}
	if a.HighWatermark() != 0 {
		t.Fatal("Check wrote something")
	}

	c, err := a.Check(mkBatch(t, 2, 10, 1), mkBatch(t, 3, 10, 2), mkBatch(t, 1, 10, 3))
	if err != nil || c.Len() != 3 {
		t.Fatalf("Check of good batches: %d, %v", c.Len(), err)
	}
	offs, err := a.AppendChecked(ctx, 7, c.Slice(0, 2))
	if err != nil || len(offs) != 2 || offs[0] != 0 || offs[1] != 2 {
		t.Fatalf("AppendChecked: %v, %v", offs, err)
	}
	if offs, err := a.AppendChecked(ctx, 7, c.Slice(2, 3)); err != nil || offs[0] != 5 {
		t.Fatalf("AppendChecked of the rest: %v, %v", offs, err)
	}
	got := readAllBatches(t, a, 0)
	if len(got) != 3 {
		t.Fatalf("%d batches stored, want 3", len(got))
	}
	for i, raw := range got {
		if h, _ := batch.ParseHeader(raw); h.PartitionLeaderEpoch != 7 || batch.Validate(raw, 0) != nil {
			t.Fatalf("batch %d: epoch %d, valid %v", i, h.PartitionLeaderEpoch, batch.Validate(raw, 0))
		}
	}

	if _, err := b.AppendChecked(ctx, 0, c); !errors.Is(err, errForeignChecked) {
		t.Fatalf("AppendChecked of another log's run: %v", err)
	}
	if b.HighWatermark() != 0 {
		t.Fatal("another log's run was written")
	}
}

// TestAppendBuilt: a batch whose framing is wrong (cut short, a record count that does not
// match its last offset delta, over the log's limit) is refused and nothing is written;
// good batches are stored as Append stores them.
func TestAppendBuilt(t *testing.T) {
	o := testOptions(t, vfs.NewMem(), "/a")
	o.MaxBatchBytes = 4096
	l := mustOpen(t, o)
	defer l.Close()
	ctx := context.Background()
	good := mkBatch(t, 2, 10, 1)
	short := good[:len(good)-1]
	miscounted := append([]byte(nil), good...)
	miscounted[60]++ // records count, the header's last field
	for name, b := range map[string][]byte{"short": short, "miscounted": miscounted, "large": mkBatch(t, 1, 5000, 1)} {
		if _, err := l.AppendBuilt(ctx, good, b); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	if l.HighWatermark() != 0 {
		t.Fatal("a refused AppendBuilt wrote something")
	}
	if offs, err := l.AppendBuilt(ctx, good, mkBatch(t, 3, 10, 2)); err != nil || offs[0] != 0 || offs[1] != 2 {
		t.Fatalf("AppendBuilt: %v, %v", offs, err)
	}
	if got := readAllBatches(t, l, 0); len(got) != 2 || batch.Validate(got[1], 0) != nil {
		t.Fatalf("%d batches stored, want 2 valid", len(got))
	}
}
