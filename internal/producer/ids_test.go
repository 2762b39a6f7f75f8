package producer

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestInitAbove: a named producer's next epoch is above both its own and
// the floor (the epoch the transaction coordinator reached without this
// file), durably; past the last epoch it is a fresh id at epoch 0.
func TestInitAbove(t *testing.T) {
	fsys, ids := openMemIDs(t)
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

// TestRetiredIDsStayFenced: an id whose name was forgotten (an expired
// transactional id) or that ran out of epochs keeps refusing its older
// epochs after the file is reopened, as it did before.
func TestRetiredIDsStayFenced(t *testing.T) {
	fsys, ids := openMemIDs(t)
	ids.Init("gone")
	forgotten, _ := ids.InitAbove("gone", 4) // epoch 5
	ids.Init("full")
	full, _ := ids.InitAbove("full", math.MaxInt16-1) // the last epoch
	if next, err := ids.Init("full"); err != nil || next.ID == full.ID {
		t.Fatalf("past the last epoch: %+v, %v; want a fresh id", next, err)
	}
	if err := ids.Forget("gone"); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		for _, c := range []struct {
			id      ID
			fenced  bool
			comment string
		}{
			{ID{forgotten.ID, forgotten.Epoch - 1}, true, "older epoch of a forgotten id"},
			{forgotten, false, "the forgotten id's last epoch"},
			{ID{full.ID, full.Epoch - 1}, true, "older epoch of an id past its last epoch"},
		} {
			err := ids.Check(c.id.ID, c.id.Epoch)
			if got := errors.Is(err, ErrFenced); got != c.fenced {
				t.Errorf("round %d, %s %+v: Check = %v, fenced want %v", round, c.comment, c.id, err, c.fenced)
			}
		}
		var err error
		if ids, err = OpenIDs(fsys, "/d"); err != nil {
			t.Fatal(err)
		}
	}
}

// Retired ids are bounded: past the bound (maxRetired; 50 here) the oldest
// are dropped (no longer fenced by this table), the newest stay fenced
// across a restart.
func TestRetiredIDsBounded(t *testing.T) {
	fsys, ids := openMemIDs(t)
	const limit = 50
	ids.retiredCap = limit
	var first, last ID
	for i := range limit + 5 {
		name := fmt.Sprint("txn-", i)
		ids.Init(name)
		id, err := ids.Init(name) // epoch 1
		if err != nil {
			t.Fatal(err)
		}
		if err := ids.Forget(name); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = id
		}
		last = id
	}
	for round := range 2 {
		if n := len(ids.retired); n != limit {
			t.Fatalf("round %d: %d retired ids kept, want %d", round, n, limit)
		}
		if err := ids.Check(first.ID, 0); err != nil {
			t.Errorf("round %d: the oldest retired id is still fenced: %v", round, err)
		}
		if err := ids.Check(last.ID, 0); !errors.Is(err, ErrFenced) {
			t.Errorf("round %d: the newest retired id at an older epoch: %v, want fenced", round, err)
		}
		var err error
		if ids, err = OpenIDs(fsys, "/d"); err != nil {
			t.Fatal(err)
		}
		ids.retiredCap = limit
	}
}

// openMemIDs opens the ids of /d on a fresh in-memory FS.
func openMemIDs(t *testing.T) (vfs.FS, *IDs) {
	t.Helper()
	fsys := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fsys, "/d"); err != nil {
		t.Fatal(err)
	}
	ids, err := OpenIDs(fsys, "/d")
	if err != nil {
		t.Fatal(err)
	}
	return fsys, ids
}
