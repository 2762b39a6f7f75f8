package producer

import (
	"math"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestInitAbove: a named producer's next epoch is above both its own and
// the floor (the epoch the transaction coordinator reached without this
// file), durably; past the last epoch it is a fresh id at epoch 0.
func TestInitAbove(t *testing.T) {
	fsys := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fsys, "/d"); err != nil {
		t.Fatal(err)
	}
	ids, err := OpenIDs(fsys, "/d")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		floor int16
		want  int16 // epoch; -1: a fresh id at epoch 0
	}{
		{-1, 0}, {-1, 1}, {7, 8}, {3, 9}, {math.MaxInt16 - 1, math.MaxInt16}, {-1, -1},
	}
	first, _ := ids.InitAbove("x", -1)
	ids, _ = OpenIDs(fsys, "/d")
	prev := first
	for i, s := range steps[1:] {
		got, err := ids.InitAbove("x", s.floor)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case s.want < 0 && (got.ID == prev.ID || got.Epoch != 0):
			t.Fatalf("step %d: %+v after %+v, want a fresh id at epoch 0", i, got, prev)
		case s.want >= 0 && (got.ID != first.ID || got.Epoch != s.want):
			t.Fatalf("step %d (floor %d): %+v, want id %d epoch %d", i, s.floor, got, first.ID, s.want)
		}
		prev = got
		if ids, err = OpenIDs(fsys, "/d"); err != nil { // durable
			t.Fatal(err)
		}
	}
}
