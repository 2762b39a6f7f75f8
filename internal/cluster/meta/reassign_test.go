package meta

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestReassign: a reassignment gives a group any replicas (the replication factor too) as a
// move: Old keeps the replicas it had (every node in either hosts it) until MoveDone; the
// current replicas again change nothing; a node that is not a member, a replica named twice
// and none at all are refused and change nothing; a group moving already gets the new
// target, Old then every node of the first target and the replicas it had, and only a
// MoveDone of the new target ends the move.
func TestReassign(t *testing.T) {
	a := newApplier(t)
	a.nodes(4)
	if r := a.create("orders", 1, 2); r.Err != nil {
		t.Fatal(r.Err)
	}
	g := a.m.State().Topics["orders"].Partitions[0]
	reps := func() (cur, old []multiraft.NodeID) {
		p := a.m.State().Topics["orders"].Partitions[0]
		return p.Replicas, p.Old
	}
	for _, c := range []struct {
		reps []multiraft.NodeID
		want error
	}{
		{[]multiraft.NodeID{9, 1}, ErrInvalidNode},
		{[]multiraft.NodeID{1, 1}, ErrInvalidNode},
		{nil, ErrInvalidNode},
		{g.Replicas, nil}, // as they are: no move
	} {
		if r := a.run(Command{Op: OpReassign, Group: g.Group, Replicas: c.reps}); !errors.Is(r.Err, c.want) || (c.want == nil) != (r.Err == nil) {
			t.Fatalf("reassign to %v: %v, want %v", c.reps, r.Err, c.want)
		}
		if cur, old := reps(); !slices.Equal(cur, g.Replicas) || old != nil {
			t.Fatalf("after reassign to %v: replicas %v old %v", c.reps, cur, old)
		}
	}
	target := []multiraft.NodeID{4, 3, 2} // three replicas, none of them the first
	if r := a.run(Command{Op: OpReassign, Group: g.Group, Replicas: target}); r.Err != nil {
		t.Fatal(r.Err)
	}
	cur, old := reps()
	if !slices.Equal(cur, target) || !slices.Equal(old, g.Replicas) {
		t.Fatalf("moving: replicas %v old %v, want %v and the replicas it had, %v", cur, old, target, g.Replicas)
	}
	replaced := []multiraft.NodeID{1, 4}
	if r := a.run(Command{Op: OpReassign, Group: g.Group, Replicas: replaced}); r.Err != nil {
		t.Fatalf("reassign while moving: %v", r.Err)
	}
	cur, old = reps()
	wantOld := slices.Clone(g.Replicas)
	for _, n := range target {
		if !slices.Contains(wantOld, n) {
			wantOld = append(wantOld, n)
		}
	}
	if !slices.Equal(cur, replaced) || !sameSet(old, wantOld) {
		t.Fatalf("replaced: replicas %v old %v, want %v and %v", cur, old, replaced, wantOld)
	}
	a.run(Command{Op: OpMoveDone, Group: g.Group, Replicas: target}) // the first target's: ignored
	if _, old := reps(); old == nil {
		t.Fatal("a MoveDone of the replaced target ended the move")
	}
	a.run(Command{Op: OpReassign, Group: g.Group, Replicas: target}) // back to the first target
	a.run(Command{Op: OpMoveDone, Group: g.Group, Replicas: target})
	if cur, old := reps(); !slices.Equal(cur, target) || old != nil {
		t.Fatalf("after MoveDone: replicas %v old %v", cur, old)
	}
	if r := a.run(Command{Op: OpReassign, Group: g.Group, Replicas: []multiraft.NodeID{1}}); r.Err != nil {
		t.Fatalf("down to one replica: %v", r.Err)
	}
}

// pinCommands follow seedCommands: queue spare (group 15) pinned where it is, early/0
// (group 11) pinned where it is moved, a rebalancing move of it refused; then early/0
// reassigned again and that reassignment replaced before it is done (so it is moving, its
// Original [1 4]), and a cancel of spare, which is not moving, refused.
func pinCommands() []Command {
	return []Command{
		{Op: OpMoveDone, Group: 15, Replicas: []multiraft.NodeID{2}},
		{Op: OpReassign, Group: 15, Replicas: []multiraft.NodeID{2}},
		{Op: OpMoveDone, Group: 11, Replicas: []multiraft.NodeID{2, 1}},
		{Op: OpReassign, Group: 11, Replicas: []multiraft.NodeID{1, 4}},
		{Op: OpMoveDone, Group: 11, Replicas: []multiraft.NodeID{1, 4}},
		{Op: OpMoveReplica, Group: 11, From: 1, To: 2},
		{Op: OpReassign, Group: 11, Replicas: []multiraft.NodeID{4, 2}},
		{Op: OpReassign, Group: 11, Replicas: []multiraft.NodeID{2, 4}},
		{Op: OpCancelReassign, Group: 15},
	}
}

// TestPinnedApplyAndSnapshot: a reassignment pins its group, moved or not; a rebalancing
// move of a pinned group is refused and Rebalance never picks one; a snapshot at every
// point restores to the same state (version 5 while nothing is pinned, so older builds
// still read it; 11 once something is, 12 with pending offsets) and the rest applies on
// top; removing a node re-places a pinned group's replica there and unpins it.
func TestPinnedApplyAndSnapshot(t *testing.T) {
	seed := seedCommands()
	cmds := append(seed, pinCommands()...)
	want := checkSnapshotCuts(t, cmds, len(seed), func(s *State) byte {
		if len(s.pinnedGroups()) > 0 {
			return snapVersionPins
		}
		return snapVersionMembers
	})
	pinned := map[multiraft.GroupID]GroupPlacement{}
	for _, g := range want.Groups() {
		if g.Pinned {
			pinned[g.Group] = g
		}
	}
	if len(pinned) != 2 || !slices.Equal(pinned[15].Replicas, []multiraft.NodeID{2}) || pinned[15].Original != nil ||
		!slices.Equal(pinned[11].Replicas, []multiraft.NodeID{2, 4}) || !slices.Equal(pinned[11].Original, []multiraft.NodeID{1, 4}) {
		t.Fatalf("pinned after the history: %+v, want group 15 on [2] and 11 moving from [1 4] to [2 4]", pinned)
	}
	if g, from, to, ok := want.Rebalance(func(GroupPlacement) bool { return true }); ok && (g == 11 || g == 15) {
		t.Fatalf("Rebalance moves pinned group %d from %d to %d", g, from, to)
	}
	pending := NewMachine(1)
	applyAll(t, pending, 1, append(cmds, Command{Op: OpGroupOffsets, Payload: []byte("offsets")}))
	if snap, err := pending.Snapshot(); err != nil || snap[0] != snapVersionPinsPending {
		t.Fatalf("pending twin: version %d %v, want %d", snap[0], err, snapVersionPinsPending)
	}

	// Node 4 removed (node 5 added to keep three), once early/0's move is done: its
	// replica there is re-placed, and the pin goes with it.
	full := NewMachine(1)
	applyAll(t, full, 1, cmds)
	applyAll(t, full, uint64(len(cmds))+1, []Command{
		{Op: OpMoveDone, Group: 11, Replicas: []multiraft.NodeID{2, 4}},
		{Op: OpAddNode, Node: Node{ID: 5}, Addr: "n5:7100"},
		{Op: OpRegisterNode, Node: Node{ID: 5, KafkaAddr: "n5:9092"}},
		{Op: OpRemoveNode, Node: Node{ID: 4}},
	})
	for _, g := range full.State().Groups() {
		if g.Group == 11 && (g.Pinned || slices.Contains(g.Replicas, 4)) {
			t.Fatalf("after removing node 4: %+v", g)
		}
		if g.Group == 15 && !g.Pinned {
			t.Fatalf("queue spare (not on node 4) unpinned by the removal: %+v", g)
		}
	}
}

// TestRebalanceLeavesPinned: two queues an operator put on node 1 alone leave nodes 2 and 3
// empty, a spread Rebalance would even out; pinned, it moves neither.
func TestRebalanceLeavesPinned(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	for _, q := range []string{"a", "b"} {
		if r := a.run(Command{Op: OpCreateQueue, Name: q, RF: 1}); r.Err != nil {
			t.Fatal(r.Err)
		}
		g := a.m.State().Queues[q].Group
		a.run(Command{Op: OpReassign, Group: g, Replicas: []multiraft.NodeID{1}})
		a.run(Command{Op: OpMoveDone, Group: g, Replicas: []multiraft.NodeID{1}})
	}
	st := a.m.State()
	if load := st.replicaCounts(); load[1] != 2 || load[2]+load[3] != 0 {
		t.Fatalf("load %v, want both queues on node 1", load)
	}
	if g, from, to, ok := st.Rebalance(func(GroupPlacement) bool { return true }); ok {
		t.Fatalf("Rebalance moves pinned group %d from node %d to %d", g, from, to)
	}
}

// sameSet: a and b hold the same nodes, in any order, each once.
func sameSet(a, b []multiraft.NodeID) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(n multiraft.NodeID) bool { return !slices.Contains(b, n) })
}

// TestCancelReassign: cancelling a reassignment under way moves the group back to the
// replicas it had before it — those before the first of two reassignments when one
// replaced the other — and keeps it pinned; Original is gone then and at MoveDone; a group
// not moving, or moving for a node's removal, has no reassignment to cancel.
func TestCancelReassign(t *testing.T) {
	a := newApplier(t)
	a.nodes(4)
	if r := a.create("orders", 1, 2); r.Err != nil {
		t.Fatal(r.Err)
	}
	g := a.m.State().Topics["orders"].Partitions[0]
	place := func() Partition { return a.m.State().Topics["orders"].Partitions[0] }
	cancel := func() error { return a.run(Command{Op: OpCancelReassign, Group: g.Group}).Err }
	if err := cancel(); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel with nothing moving: %v", err)
	}
	spare := slices.DeleteFunc([]multiraft.NodeID{1, 2, 3, 4}, func(n multiraft.NodeID) bool { return slices.Contains(g.Replicas, n) })
	a.run(Command{Op: OpReassign, Group: g.Group, Replicas: spare})
	a.run(Command{Op: OpReassign, Group: g.Group, Replicas: []multiraft.NodeID{spare[0]}})
	if p := place(); !slices.Equal(p.Original, g.Replicas) {
		t.Fatalf("after two reassignments: original %v, want %v", p.Original, g.Replicas)
	}
	if err := cancel(); err != nil {
		t.Fatal(err)
	}
	p := place()
	if !slices.Equal(p.Replicas, g.Replicas) || p.Original != nil || p.Old == nil || !p.Pinned {
		t.Fatalf("cancelled: %+v, want moving back to %v, pinned, no original", p, g.Replicas)
	}
	if err := cancel(); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancelling the cancel: %v", err)
	}
	a.run(Command{Op: OpMoveDone, Group: g.Group, Replicas: g.Replicas})
	// A node's removal moves the group: no reassignment of it to cancel.
	a.run(Command{Op: OpRemoveNode, Node: Node{ID: g.Replicas[0]}})
	if p := place(); p.Old == nil {
		t.Fatalf("removing node %d did not move %+v", g.Replicas[0], p)
	}
	if err := cancel(); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel of a removal's move: %v", err)
	}
}
