package storage

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// PlaceChecked gives offsets in the order of the calls before any wait,
// and each Placed's Wait answers once its group is durable, with those
// offsets. A group whose write fails answers its error from Wait (never
// success), and an append placed behind it either fails with it or lands
// right after the log's acknowledged end, never in a hole.
func TestPlaceCheckedOrderAndFailure(t *testing.T) {
	efs, _, l, sent := faultLog(t)
	defer l.Close()
	place := func(b []byte) Placed {
		t.Helper()
		c, err := l.Check(b)
		if err != nil {
			t.Fatal(err)
		}
		p, err := l.PlaceChecked(-1, c) // mkBatch's epoch: checkContents compares bytes
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var placed []Placed
	for i := range 3 {
		b := mkBatch(t, 2, 100, int64(10+i))
		placed = append(placed, place(b))
		sent = append(sent, b)
		if got, want := placed[i].Offsets()[0], int64(10+2*i); got != want {
			t.Fatalf("placement %d at offset %d, want %d: offsets follow the calls", i, got, want)
		}
	}
	for i, p := range placed {
		offs, err := p.Wait(context.Background())
		if err != nil || offs[0] != int64(10+2*i) {
			t.Fatalf("wait %d: %v, %v", i, offs, err)
		}
		if hw := l.HighWatermark(); hw < int64(12+2*i) {
			t.Fatalf("wait %d returned with the high watermark at %d", i, hw)
		}
	}
	checkContents(t, l, sent)

	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Path: l.active.path(logSuffix), ShortWrite: 30, Count: 1})
	d, e := mkBatch(t, 2, 100, 20), mkBatch(t, 2, 100, 21)
	pd, pe := place(d), place(e)
	if _, err := pd.Wait(context.Background()); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the first placement after the fault: %v, want EIO", err)
	}
	offs, err := pe.Wait(context.Background())
	switch {
	case errors.Is(err, syscall.EIO): // in the failed group, or placed before its repair
	case err != nil:
		t.Fatalf("the second placement: %v", err)
	default:
		if offs[0] != 16 {
			t.Fatalf("the second placement, stored, at %d: want 16, right after the acknowledged end", offs[0])
		}
		sent = append(sent, e)
	}
	checkContents(t, l, sent)
}
