package meta

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// hookLog records what a GroupOffsets hook was handed.
type hookLog struct {
	got         []string
	checkpoints int
	fail        error
}

func (h *hookLog) ApplyGroupOffsets(index uint64, payload []byte) error {
	h.got = append(h.got, fmt.Sprintf("%d:%s", index, payload))
	return h.fail
}

func (h *hookLog) Checkpoint() error { h.checkpoints++; return h.fail }

func applyOffsets(t *testing.T, m *Machine, index uint64, payload string) {
	t.Helper()
	c := Command{Op: OpGroupOffsets, Origin: 9, Request: index, Payload: []byte(payload)}
	if err := m.Apply([]multiraft.Entry{{Index: index, Term: 1, Data: c.Encode(nil)}}); err != nil {
		t.Fatal(err)
	}
}

// Payloads applied before the broker's hook is set (a restart re-applies the log before
// the broker opens) wait for it, in order, and a snapshot taken meanwhile carries them;
// once set, the hook gets every payload as it is applied, never a barrier, and a snapshot
// first checkpoints it. The catalog does not change with group offsets.
func TestGroupOffsetsReachTheHookInOrder(t *testing.T) {
	m := NewMachine(1)
	if m.CompactLimit() != math.MaxUint64 {
		t.Fatalf("a catalog without group offsets must compact as before")
	}
	applyAll(t, m, 1, seedCommands()[:3])
	before := m.State()
	applyOffsets(t, m, 10, "a")
	applyOffsets(t, m, 11, "") // a barrier
	applyOffsets(t, m, 12, "b")
	if m.State() != before {
		t.Fatal("group offsets changed the catalog's State")
	}
	if m.CompactLimit() != 0 {
		t.Fatal("the log must be kept once group offsets go through it")
	}
	snap, err := m.Snapshot()
	if err != nil || snap[0] != snapVersionMembersPending {
		t.Fatalf("snapshot with pending offsets: version %d, %v", snap[0], err)
	}

	// A node restarted on that snapshot hands them to its hook when it is set.
	r := NewMachine(1)
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.State(), m.State()) {
		t.Fatal("restored catalog differs")
	}
	h := &hookLog{}
	if err := r.SetGroupOffsets(h); err != nil {
		t.Fatal(err)
	}
	applyOffsets(t, r, 13, "c")
	if want := []string{"10:a", "12:b", "13:c"}; !reflect.DeepEqual(h.got, want) {
		t.Fatalf("hook got %q, want %q", h.got, want)
	}
	snap, err = r.Snapshot()
	if err != nil || snap[0] != snapVersionMembers || h.checkpoints != 1 {
		t.Fatalf("snapshot after delivery: version %d, %d checkpoints, %v", snap[0], h.checkpoints, err)
	}

	// A hook that fails stops the group (Apply's error) and fails the snapshot.
	h.fail = errors.New("disk")
	c := Command{Op: OpGroupOffsets, Origin: 9, Request: 14, Payload: []byte("d")}
	if err := r.Apply([]multiraft.Entry{{Index: 14, Term: 1, Data: c.Encode(nil)}}); err == nil {
		t.Fatal("a failed hook did not stop the apply")
	}
	if _, err := r.Snapshot(); err == nil {
		t.Fatal("a failed checkpoint did not fail the snapshot")
	}
}

// A snapshot's group-offsets section is checked like the rest: empty, out of order or
// empty payloads are refused.
func TestSnapshotPendingSectionChecked(t *testing.T) {
	m := NewMachine(1)
	applyOffsets(t, m, 5, "x")
	good, _ := m.Snapshot()
	base := NewMachine(1).State().encode()
	base[0] = snapVersionPending
	for name, b := range map[string][]byte{
		"empty section": appendPending(append([]byte(nil), base...), nil),
		"out of order":  appendPending(append([]byte(nil), base...), []groupOffsets{{5, []byte("a")}, {5, []byte("b")}}),
		"empty payload": appendPending(append([]byte(nil), base...), []groupOffsets{{5, nil}}),
		"trailing":      append(append([]byte(nil), good...), 0),
	} {
		if err := NewMachine(1).Restore(b); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
}
