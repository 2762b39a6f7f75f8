package replpart

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// shortLog answers one result fewer than it was given batches.
type shortLog struct{ fakeLog }

func (l *shortLog) Apply(term uint64, batches [][]byte) ([]BatchResult, error) {
	rs, err := l.fakeLog.Apply(term, batches)
	return rs[:len(rs)-1], err
}

// TestMachineStopsOnBadEntry: what apply cannot apply faithfully stops the group (an
// error) rather than being skipped: a malformed entry, a log error, a log that answers for
// the wrong number of batches. Results are kept for this node's entries only.
func TestMachineStopsOnBadEntry(t *testing.T) {
	good := (&Entry{Origin: 1, Request: 1, Batches: [][]byte{[]byte("a")}}).Encode(nil)
	disk := errors.New("disk full")
	for _, tc := range []struct {
		name string
		log  Log
		data []byte
		want error
	}{
		{"malformed", &fakeLog{}, []byte{entryVersion, 1, 1, 0}, ErrBadEntry},
		{"version", &fakeLog{}, append([]byte{9}, good[1:]...), ErrBadEntry},
		{"log error", &fakeLog{failApply: disk}, good, disk},
		{"short answer", &shortLog{}, good, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMachine(1, tc.log)
			err := m.Apply([]multiraft.Entry{{Index: 5, Term: 2, Data: tc.data}})
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Apply: %v, want %v", err, tc.want)
			}
		})
	}
	m := NewMachine(2, &fakeLog{})
	other := (&Entry{Origin: 1, Request: 1, Batches: [][]byte{[]byte("a")}}).Encode(nil)
	mine := (&Entry{Origin: 2, Request: 7, Batches: [][]byte{[]byte("b")}}).Encode(nil)
	if err := m.Apply([]multiraft.Entry{{Index: 2, Term: 1, Data: other}, {Index: 3, Term: 1, Data: mine}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.results.Take(2, 1); ok {
		t.Fatal("kept a result for another node's entry")
	}
	if _, ok := m.results.Take(3, 6); ok {
		t.Fatal("handed a result to the wrong request")
	}
	if rs, ok := m.results.Take(3, 7); !ok || len(rs) != 1 || rs[0].Base != 2 { // "a" is 2 records
		t.Fatalf("take(3, 7) = %+v, %v", rs, ok)
	}
}

// applyBatch applies, at index i, an entry of one batch b to each machine.
func applyBatch(t *testing.T, i uint64, b string, ms ...*Machine) {
	t.Helper()
	e := (&Entry{Origin: 1, Request: i, Batches: [][]byte{[]byte(b)}}).Encode(nil)
	for _, m := range ms {
		if err := m.Apply([]multiraft.Entry{{Index: i, Term: 1, Data: e}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMachineSnapshotRestore: a snapshot carries the log's checkpoint, Restore hands it
// back (cutting what was applied after it), and nil restores the empty log.
func TestMachineSnapshotRestore(t *testing.T) {
	l := &fakeLog{}
	m := NewMachine(1, l)
	apply := func(i uint64, b string) { t.Helper(); applyBatch(t, i, b, m) }
	apply(2, "a")
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	apply(3, "b")
	if err := m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if recs := l.snapshot(); len(recs) != 1 || recs[0].Batch != "a" {
		t.Fatalf("after Restore: %+v, want only a", recs)
	}
	if _, ok := m.results.Take(2, 2); ok {
		t.Fatal("a result survived Restore")
	}
	if err := m.Restore([]byte{9}); err == nil {
		t.Fatal("Restore of an unknown snapshot version accepted")
	}
	if err := m.Restore(nil); err != nil || len(l.snapshot()) != 0 {
		t.Fatalf("Restore(nil): %v, log %+v", err, l.snapshot())
	}
}
