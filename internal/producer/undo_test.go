package producer

import (
	"errors"
	"testing"
)

// TestUndoTakesBackWhatWasRecorded: batches recorded after KeepLocked — a known
// producer's next ones past its window, a new epoch, a producer seen for the first time,
// and an encoded state's, beyond the window — are taken back by UndoLocked, and the
// state decides as it did before them.
func TestUndoTakesBackWhatWasRecorded(t *testing.T) {
	var ps State
	ps.Lock()
	defer ps.Unlock()
	for i := range int32(5) {
		ps.RecordLocked(hdr(7, 0, i*2, 2), int64(i*2))
	}
	var u Undo
	for _, id := range []int64{7, 8, 7} {
		ps.KeepLocked(&u, id)
	}
	ps.RecordLocked(hdr(7, 0, 10, 2), 10) // the window drops the first batch
	ps.RecordLocked(hdr(7, 1, 0, 1), 12)  // a new epoch replaces the entry
	ps.RecordLocked(hdr(8, 0, 0, 1), 13)
	ps.UndoLocked(&u)
	checks := []struct {
		name string
		h    [4]int32 // id, epoch, sequence, count
		dup  bool
		err  error
	}{
		{"the first batch, a duplicate again", [4]int32{7, 0, 0, 2}, true, nil},
		{"the next batch, expected again", [4]int32{7, 0, 10, 1}, false, nil},
		{"the new epoch's second batch, a gap again", [4]int32{7, 1, 1, 1}, false, ErrOutOfOrderSequence},
		{"producer 8, unknown again", [4]int32{8, 0, 5, 1}, false, nil},
	}
	for _, c := range checks {
		dup, err := ps.CheckLocked(hdr(int64(c.h[0]), int16(c.h[1]), c.h[2], c.h[3]))
		if (dup != nil) != c.dup || !errors.Is(err, c.err) {
			t.Errorf("%s: duplicate %v, err %v", c.name, dup, err)
		}
	}
	if len(u.saved) != 0 {
		t.Fatalf("undo kept %d producers after UndoLocked", len(u.saved))
	}
}
