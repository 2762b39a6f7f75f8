package meta

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

// stateHook is a GroupStateSnapshotter over a model of the broker's groups: a payload
// "set g=v" sets group g, "del g" deletes it; its state is one "set" payload per group.
type stateHook struct {
	hookLog
	groups  map[string]string
	forgets int
}

func newStateHook(groups map[string]string) *stateHook {
	return &stateHook{groups: maps.Clone(groups)}
}

func (h *stateHook) ApplyGroupOffsets(index uint64, payload []byte) error {
	if err := h.hookLog.ApplyGroupOffsets(index, payload); err != nil {
		return err
	}
	if h.groups == nil {
		h.groups = map[string]string{}
	}
	for _, op := range strings.Split(string(payload), ";") {
		if kv, ok := strings.CutPrefix(op, "set "); ok {
			g, v, _ := strings.Cut(kv, "=")
			h.groups[g] = v
		} else if g, ok := strings.CutPrefix(op, "del "); ok {
			delete(h.groups, g)
		}
	}
	return nil
}

func (h *stateHook) GroupState() ([][]byte, bool, error) {
	var out [][]byte
	for _, g := range slices.Sorted(maps.Keys(h.groups)) {
		out = append(out, []byte("set "+g+"="+h.groups[g]))
	}
	return out, true, nil
}

func (h *stateHook) ForgetGroups() error {
	h.forgets++
	clear(h.groups)
	return nil
}

func setLevel(t *testing.T, m *Machine, index uint64, level int) {
	t.Helper()
	applyAll(t, m, index, []Command{{Op: OpSetFeatureLevel, Level: level}})
}

// TestGroupStateSnapshot: below LevelGroupState a snapshot is incomplete and the log is
// kept; at it the snapshot carries the hook's whole state (version 15) and the log may be
// compacted. A follower that was behind, holding a group deleted meanwhile and an older
// offset, takes the snapshot's state in place of its own; a node restarting from it
// before its hook is set does too, with the log's tail after it, and a snapshot taken
// before the hook is set is still complete.
func TestGroupStateSnapshot(t *testing.T) {
	leader := NewMachine(1)
	h := newStateHook(nil)
	if err := leader.SetGroupOffsets(h); err != nil {
		t.Fatal(err)
	}
	applyAll(t, leader, 1, seedCommands()[:3])
	setLevel(t, leader, 4, LevelGroupMembers)
	applyOffsets(t, leader, 5, "set a=1;set b=1")
	snap, err := leader.Snapshot()
	if err != nil || snap[0] != snapVersionLevel || leader.CompactLimit() != 0 {
		t.Fatalf("at level %d: snapshot version %d (%v), compact limit %d: want version %d and the log kept",
			LevelGroupMembers, snap[0], err, leader.CompactLimit(), snapVersionLevel)
	}

	setLevel(t, leader, 6, LevelGroupState)
	applyOffsets(t, leader, 7, "set a=2;del b")
	snap, err = leader.Snapshot()
	if err != nil || snap[0] != snapVersionGroupState || leader.CompactLimit() != math.MaxUint64 {
		t.Fatalf("at level %d: snapshot version %d (%v), compact limit %d: want version %d and no limit",
			LevelGroupState, snap[0], err, leader.CompactLimit(), snapVersionGroupState)
	}

	// A follower that was behind: b (deleted since) and an old a, plus a group it should
	// never have had. The snapshot's state replaces all of it.
	follower := NewMachine(2)
	fh := newStateHook(map[string]string{"a": "1", "b": "1", "stale": "9"})
	if err := follower.SetGroupOffsets(fh); err != nil {
		t.Fatal(err)
	}
	if err := follower.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "2"}; !maps.Equal(fh.groups, want) || fh.forgets != 1 {
		t.Fatalf("follower after the snapshot: %v (%d forgets), want %v after one forget", fh.groups, fh.forgets, want)
	}
	if follower.CompactLimit() != math.MaxUint64 {
		t.Fatal("a node restored from a complete snapshot keeps its whole log")
	}

	// A restart from it: the state and the log's tail wait for the hook; a snapshot taken
	// meanwhile is complete and carries both.
	restarted := NewMachine(1)
	if err := restarted.Restore(snap); err != nil {
		t.Fatal(err)
	}
	applyOffsets(t, restarted, 8, "set d=1")
	again, err := restarted.Snapshot()
	if err != nil || again[0] != snapVersionGroupState {
		t.Fatalf("snapshot before the hook is set: version %d, %v", again[0], err)
	}
	for name, m := range map[string]*Machine{"restarted": restarted, "restored again": restoreOf(t, again)} {
		rh := newStateHook(map[string]string{"b": "1", "from-the-journal": "x"})
		if err := m.SetGroupOffsets(rh); err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"a": "2", "d": "1"}; !maps.Equal(rh.groups, want) {
			t.Fatalf("%s: hook holds %v, want %v", name, rh.groups, want)
		}
	}

	// An incomplete snapshot restored (an older build's, or a state too large) keeps the
	// whole log again.
	old := NewMachine(3)
	applyAll(t, old, 1, seedCommands()[:3])
	applyOffsets(t, old, 4, "set x=1")
	incomplete, _ := old.Snapshot()
	if err := follower.Restore(incomplete); err != nil {
		t.Fatal(err)
	}
	if follower.CompactLimit() != 0 {
		t.Fatal("a node restored from an incomplete snapshot may compact its log")
	}
}

// A complete snapshot needs a hook that can forget its groups: one that cannot stops the
// restore rather than keep groups the state no longer has.
func TestGroupStateNeedsAForgettingHook(t *testing.T) {
	m := NewMachine(1)
	if err := m.SetGroupOffsets(newStateHook(nil)); err != nil {
		t.Fatal(err)
	}
	applyAll(t, m, 1, seedCommands()[:3])
	setLevel(t, m, 4, LevelGroupState)
	applyOffsets(t, m, 5, "set a=1")
	snap, _ := m.Snapshot()
	r := NewMachine(2)
	if err := r.SetGroupOffsets(&hookLog{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(snap); err == nil {
		t.Fatal("a hook that cannot forget took a complete state on top of its own")
	}
}

// A state too large for one snapshot makes it incomplete: the log is kept.
func TestGroupStateTooLarge(t *testing.T) {
	m := NewMachine(1)
	h := newStateHook(nil)
	if err := m.SetGroupOffsets(h); err != nil {
		t.Fatal(err)
	}
	defer func(l int) { groupStateLimit = l }(groupStateLimit)
	groupStateLimit = 64 << 10 // as MaxGroupStateBytes, without 48 MiB of payloads
	setLevel(t, m, 1, LevelGroupState)
	big := strings.Repeat("x", 16<<10-100)
	for i := range groupStateLimit / len(big) {
		applyOffsets(t, m, uint64(2+i), "set "+string(rune('a'+i))+"="+big)
	}
	if snap, err := m.Snapshot(); err != nil || snap[0] != snapVersionGroupState || m.GroupStateTooLarge() {
		t.Fatalf("a state just under the limit: version %d (%v), too large %v", snap[0], err, m.GroupStateTooLarge())
	}
	applyOffsets(t, m, 99, "set z="+big)
	snap, err := m.Snapshot()
	if err != nil || snap[0] == snapVersionGroupState || m.CompactLimit() != 0 || !m.GroupStateTooLarge() {
		t.Fatalf("a state over %d bytes: version %d (%v), compact limit %d, too large %v", groupStateLimit, snap[0], err,
			m.CompactLimit(), m.GroupStateTooLarge())
	}
}

// A complete snapshot's section is checked: at a level below LevelGroupState, as of an
// index before the catalog's, with an empty payload, or with bytes after it, it is refused.
func TestGroupStateSectionChecked(t *testing.T) {
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands()[:3])
	setLevel(t, m, 4, LevelGroupState)
	base := m.State().encode()
	base[0] = snapVersionGroupState
	low := NewMachine(1)
	setLevel(t, low, 1, LevelGroupMembers)
	lowBase := low.State().encode()
	lowBase[0] = snapVersionGroupState
	good := appendGroupState(slices.Clone(base), groupState{index: 9, payloads: [][]byte{[]byte("set a=1")}})
	if err := NewMachine(1).Restore(good); err != nil {
		t.Fatalf("a good section: %v", err)
	}
	for name, b := range map[string][]byte{
		"level 2":       appendGroupState(slices.Clone(lowBase), groupState{index: 9}),
		"before":        appendGroupState(slices.Clone(base), groupState{index: 1}),
		"empty payload": appendGroupState(slices.Clone(base), groupState{index: 9, payloads: [][]byte{nil}}),
		"trailing":      append(slices.Clone(good), 0),
		"truncated":     good[:len(good)-1],
	} {
		if err := NewMachine(1).Restore(b); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
	if err := NewMachine(1).Restore(append([]byte{snapVersionGroupState + 1}, base[1:]...)); err == nil {
		t.Error("a version past the newest restored")
	}
}

func restoreOf(t *testing.T, snap []byte) *Machine {
	t.Helper()
	m := NewMachine(1)
	if err := m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	return m
}
