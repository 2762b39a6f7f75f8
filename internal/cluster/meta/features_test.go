package meta

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// levelCommands raise the level, then try to lower it (nothing changes).
func levelCommands() []Command {
	return []Command{
		{Op: OpSetFeatureLevel, Level: LevelGroupMembers},
		{Op: OpSetFeatureLevel, Level: LevelBase},
		{Op: OpSetFeatureLevel, Level: 0},
	}
}

// TestFeatureLevelApplyAndSnapshot: a level only goes up; a catalog at LevelBase snapshots
// in a version binaries from before levels read (11 at most), a raised one in 13 (14 with
// offsets pending), and both restore to the same state.
func TestFeatureLevelApplyAndSnapshot(t *testing.T) {
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands())
	if got := m.State().FeatureLevel(); got != LevelBase {
		t.Fatalf("a new catalog is at level %d, want %d", got, LevelBase)
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap[0] > snapVersionPins {
		t.Fatalf("a catalog at the base level snapshots as version %d: an older binary could not read it", snap[0])
	}
	from := uint64(len(seedCommands()) + 1)
	applyAll(t, m, from, levelCommands())
	if got := m.State().FeatureLevel(); got != LevelGroupMembers {
		t.Fatalf("level %d after raising to %d and asking for lower ones", got, LevelGroupMembers)
	}
	for _, pending := range []bool{false, true} {
		if pending {
			applyAll(t, m, from+10, []Command{{Op: OpGroupOffsets, Payload: []byte("offsets")}})
		}
		snap, err := m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		want := byte(snapVersionLevel)
		if pending {
			want = snapVersionLevelPending
		}
		if snap[0] != want {
			t.Fatalf("pending=%v: snapshot version %d, want %d", pending, snap[0], want)
		}
		r := NewMachine(2)
		if err := r.Restore(snap); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.State(), m.State()) {
			t.Fatalf("pending=%v: the restored catalog differs:\n%+v\n%+v", pending, r.State(), m.State())
		}
	}
}

// TestFeatureLevelAboveBinaryStops: an entry or a snapshot raising the level past what this
// binary reads stops the group with ErrFeatureLevel (what an operator must see), and
// changes nothing.
func TestFeatureLevelAboveBinaryStops(t *testing.T) {
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands()[:4])
	before := m.State()
	c := Command{Op: OpSetFeatureLevel, Level: MaxFeatureLevel + 1, Origin: 9, Request: 1}
	err := m.Apply([]multiraft.Entry{{Index: 5, Term: 2, Data: c.Encode(nil)}})
	if !errors.Is(err, ErrFeatureLevel) {
		t.Fatalf("applying level %d: %v, want ErrFeatureLevel", c.Level, err)
	}
	if m.State() != before {
		t.Fatal("a refused level changed the catalog")
	}

	// A snapshot of a newer binary's catalog: this binary's at level 2, the level patched.
	applyAll(t, m, 5, levelCommands()[:1])
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap[len(snap)-1] != LevelGroupMembers {
		t.Fatalf("the level is not the snapshot's last byte: %x", snap[len(snap)-8:])
	}
	snap[len(snap)-1] = MaxFeatureLevel + 1
	if err := NewMachine(2).Restore(snap); !errors.Is(err, ErrFeatureLevel) {
		t.Fatalf("restoring level %d: %v, want ErrFeatureLevel", MaxFeatureLevel+1, err)
	}
	// Level 1 is never written in a snapshot: a forged one is malformed.
	snap[len(snap)-1] = LevelBase
	if err := NewMachine(2).Restore(snap); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("restoring an explicit base level: %v, want ErrBadCommand", err)
	}
}

// TestAdvertisedFeatureLevel: the level a node answers its peers with is this binary's
// unless held lower, never below the base nor above the binary's.
func TestAdvertisedFeatureLevel(t *testing.T) {
	m := NewMachine(1)
	tests := []struct{ set, want int }{
		{-1, MaxFeatureLevel}, // not set: the binary's
		{LevelBase, LevelBase},
		{0, LevelBase},
		{MaxFeatureLevel + 5, MaxFeatureLevel},
		{MaxFeatureLevel, MaxFeatureLevel},
	}
	for _, tt := range tests {
		if tt.set >= 0 {
			m.AdvertiseFeatureLevel(tt.set)
		}
		got, err := m.ServeRequest(2, []byte{requestFeatureLevel})
		if err != nil || len(got) != 1 || int(got[0]) != tt.want {
			t.Errorf("advertise %d: answered %x, %v; want level %d", tt.set, got, err, tt.want)
		}
	}
	for _, req := range [][]byte{nil, {0}, {requestFeatureLevel, 0}} {
		if _, err := m.ServeRequest(2, req); err == nil {
			t.Errorf("request %x answered", req)
		}
	}
}

// TestFeatureLevelMembers: registered members and added nodes not registered yet; never a
// removed node.
func TestFeatureLevelMembers(t *testing.T) {
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands()) // nodes 1, 2, 4 members; 3 removed
	applyAll(t, m, 100, []Command{{Op: OpAddNode, Node: Node{ID: 7}, Addr: "n7:7100"}})
	got := m.State().FeatureLevelMembers()
	slices.Sort(got)
	if want := []multiraft.NodeID{1, 2, 4, 7}; !slices.Equal(got, want) {
		t.Fatalf("members that must read a level: %v, want %v", got, want)
	}
}

// TestEveryOpHasALevel: every op Decode knows has a feature level, and no other does, so a
// new op cannot be added without deciding which level admits it.
func TestEveryOpHasALevel(t *testing.T) {
	for op := range 256 {
		_, err := Decode([]byte{commandVersion, byte(op), 0, 0})
		known := err == nil || !strings.Contains(err.Error(), "unknown op")
		if _, listed := opLevels[Op(op)]; known != listed {
			t.Errorf("op %d: Decode knows it %v, opLevels lists it %v", op, known, listed)
		}
		if l := opLevels[Op(op)]; l > MaxFeatureLevel {
			t.Errorf("op %d at level %d, above what this binary reads (%d)", op, l, MaxFeatureLevel)
		}
	}
}

// TestProposalWaitsForItsLevel: an op above the catalog's level is refused before it is
// proposed (ErrFeatureLevel), and admitted once the level rises; OpSetFeatureLevel is
// admitted below its own level. Group records the caller says need a higher level are
// refused too.
func TestProposalWaitsForItsLevel(t *testing.T) {
	saved := opLevels[OpUpdateTopic]
	opLevels[OpUpdateTopic] = LevelGroupMembers // as a newer op would be
	defer func() { opLevels[OpUpdateTopic] = saved }()
	m := NewMachine(1)
	c := &Catalog{sm: m}
	if err := c.checkOpLevel(&Command{Op: OpUpdateTopic}); !errors.Is(err, ErrFeatureLevel) {
		t.Fatalf("an op of level %d at level %d: %v, want ErrFeatureLevel", LevelGroupMembers, LevelBase, err)
	}
	if err := c.checkOpLevel(&Command{Op: OpSetFeatureLevel, Level: LevelGroupMembers}); err != nil {
		t.Fatalf("raising the level refused: %v", err)
	}
	if _, err := c.ProposeGroupOffsetsAsync([]byte("records"), LevelGroupMembers); !errors.Is(err, ErrFeatureLevel) {
		t.Fatalf("group records of level %d at level %d: %v, want ErrFeatureLevel", LevelGroupMembers, LevelBase, err)
	}
	applyAll(t, m, 1, levelCommands()[:1])
	if err := c.checkOpLevel(&Command{Op: OpUpdateTopic}); err != nil {
		t.Fatalf("the op at its level: %v", err)
	}
}

// TestReceiptKey: the first raise to LevelReceiptKey that carries a key sets it, later ones
// keep it; a raise below the level carries none; a snapshot at the level restores the key
// (also with offsets pending and with no key yet); a key of another length is malformed.
func TestReceiptKey(t *testing.T) {
	key := func(b byte) []byte { return []byte(strings.Repeat(string(rune(b)), ReceiptKeyLen)) }
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands())
	from := uint64(len(seedCommands()) + 1)
	applyAll(t, m, from, []Command{{Op: OpSetFeatureLevel, Level: LevelDeadLetterHistory, Payload: key('x')}})
	if k := m.State().ReceiptKey; k != nil {
		t.Fatalf("a raise below LevelReceiptKey set key %x", k)
	}
	// At the level without a key (a hand-made entry): the level rises, no key, and the
	// snapshot says so.
	applyAll(t, m, from+1, []Command{{Op: OpSetFeatureLevel, Level: LevelReceiptKey}})
	if k := m.State().ReceiptKey; k != nil || m.State().FeatureLevel() != LevelReceiptKey {
		t.Fatalf("level %d key %x", m.State().FeatureLevel(), k)
	}
	roundTrip := func(what string) {
		t.Helper()
		snap, err := m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		r := NewMachine(2)
		if err := r.Restore(snap); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !reflect.DeepEqual(r.State(), m.State()) {
			t.Fatalf("%s: the restored catalog differs:\n%+v\n%+v", what, r.State(), m.State())
		}
	}
	roundTrip("no key")
	applyAll(t, m, from+2, []Command{
		{Op: OpSetFeatureLevel, Level: LevelReceiptKey, Payload: key('a')},
		{Op: OpSetFeatureLevel, Level: LevelReceiptKey, Payload: key('b')}, // a second raise, racing
	})
	if k := m.State().ReceiptKey; string(k) != string(key('a')) {
		t.Fatalf("key %q, want the first committed", k)
	}
	roundTrip("key")
	applyAll(t, m, from+10, []Command{{Op: OpGroupOffsets, Payload: []byte("offsets")}})
	roundTrip("key, offsets pending")

	for _, n := range []int{1, ReceiptKeyLen - 1, ReceiptKeyLen + 1} {
		c := Command{Op: OpSetFeatureLevel, Level: LevelReceiptKey, Payload: make([]byte, n)}
		if _, err := Decode(c.Encode(nil)); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("a key of %d bytes decodes: %v", n, err)
		}
	}
	c := Command{Op: OpSetFeatureLevel, Level: LevelReceiptKey, Origin: 1, Request: 2, Payload: key('k')}
	if got, err := Decode(c.Encode(nil)); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
}

// TestRaiseFeatureLevelMakesAKey: the catalog's raise to LevelReceiptKey proposes a random
// key, which every replica holds; a raise to a lower level carries none.
func TestRaiseFeatureLevelMakesAKey(t *testing.T) {
	c := newCluster(t, 3)
	cat := c.nodes[c.elect()].cat
	if err := c.call(func(ctx context.Context) error { return cat.RaiseFeatureLevel(ctx, LevelDeadLetterHistory) }); err != nil {
		t.Fatal(err)
	}
	if k := cat.sm.State().ReceiptKey; k != nil {
		t.Fatalf("key %x below the level", k)
	}
	if err := c.call(func(ctx context.Context) error { return cat.RaiseFeatureLevel(ctx, LevelReceiptKey) }); err != nil {
		t.Fatal(err)
	}
	want := cat.sm.State()
	if k := want.ReceiptKey; len(k) != ReceiptKeyLen || strings.Count(string(k), "\x00") == ReceiptKeyLen {
		t.Fatalf("key %x", k)
	}
	c.converge(want)
}
