package meta

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// A node is added and registers; a node is removed: its replicas are re-placed on the
// others (the least loaded that lacks them), Old keeps the hosting set until MoveDone, and
// the removed id never comes back.
func TestMembershipAddRemove(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	if r := a.create("orders", 3, 3); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := a.run(Command{Op: OpCreateQueue, Name: "jobs", RF: 3}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Three nodes, three replicas each: node 3 has nowhere to go.
	r := a.run(Command{Op: OpRemoveNode, Node: Node{ID: 3}})
	if !errors.Is(r.Err, ErrNoQuorum) {
		t.Fatalf("remove with no room: %v", r.Err)
	}
	if s := a.m.State(); s.Removed[3] || len(s.Nodes) != 3 || len(s.Moving()) != 0 {
		t.Fatalf("a refused removal changed the catalog: %+v", s)
	}
	for _, c := range []struct {
		cmd  Command
		want error
	}{
		{Command{Op: OpAddNode, Node: Node{ID: 4}, Addr: "n4:7100"}, nil},
		{Command{Op: OpAddNode, Node: Node{ID: 4}, Addr: "n4:7100"}, nil},
		{Command{Op: OpAddNode, Node: Node{ID: 4}, Addr: "elsewhere:1"}, ErrNodeExists},
		{Command{Op: OpAddNode, Node: Node{ID: 2}, Addr: "n2:7100"}, ErrNodeExists},
		{Command{Op: OpAddNode, Node: Node{ID: 0}, Addr: "x:1"}, ErrInvalidNode},
		{Command{Op: OpRegisterNode, Node: Node{ID: 4, KafkaAddr: "k4"}}, nil},
		{Command{Op: OpRemoveNode, Node: Node{ID: 3}}, nil},
		{Command{Op: OpRemoveNode, Node: Node{ID: 3}}, nil}, // again: done already
		{Command{Op: OpRegisterNode, Node: Node{ID: 3, KafkaAddr: "k3"}}, ErrNodeRemoved},
		{Command{Op: OpAddNode, Node: Node{ID: 3}, Addr: "n3:7100"}, ErrNodeRemoved},
		{Command{Op: OpRemoveNode, Node: Node{ID: 7}}, ErrInvalidNode},
	} {
		if r := a.run(c.cmd); !errors.Is(r.Err, c.want) || (c.want == nil) != (r.Err == nil) {
			t.Fatalf("%+v: %v, want %v", c.cmd, r.Err, c.want)
		}
	}
	s := a.m.State()
	if _, ok := s.Node(3); !ok || !s.Listed(3) || !s.Removed[3] || s.Joined[4] != "n4:7100" {
		t.Fatalf("after the removal: nodes %+v removed %v joined %v", s.Nodes, s.Removed, s.Joined)
	}
	moving := s.Moving()
	if len(moving) != 4 { // three partitions and the queue were all on node 3
		t.Fatalf("%d groups moving, want 4: %+v", len(moving), moving)
	}
	for _, g := range moving {
		if slices.Contains(g.Replicas, 3) || !slices.Contains(g.Replicas, 4) || !slices.Contains(g.Old, 3) || !g.Moved {
			t.Fatalf("%s: replicas %v old %v", g.What(), g.Replicas, g.Old)
		}
		if !g.Hosts(3) || !g.Hosts(4) {
			t.Fatalf("%s: both the old and the new node host it during the move", g.What())
		}
	}
	if !s.Holds(3) {
		t.Fatal("node 3 still holds replicas until the moves are done")
	}
	// A MoveDone naming other replicas changes nothing; the right one ends the move.
	g := moving[0]
	a.run(Command{Op: OpMoveDone, Group: g.Group, Replicas: []multiraft.NodeID{1, 2, 3}})
	if len(a.m.State().Moving()) != 4 {
		t.Fatal("a stale MoveDone ended a move")
	}
	for _, g := range moving {
		a.run(Command{Op: OpMoveDone, Group: g.Group, Replicas: g.Replicas})
	}
	s = a.m.State()
	if len(s.Moving()) != 0 || s.Holds(3) || s.Listed(3) {
		t.Fatalf("moves done: still moving %+v, holds 3 %v", s.Moving(), s.Holds(3))
	}
	for _, g := range s.Groups() {
		if !g.Moved {
			t.Fatalf("%s: a moved group must stay marked (never bootstrapped again)", g.What())
		}
	}
	// And the whole history survives a snapshot.
	snap, err := a.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r2 := NewMachine(1)
	if err := r2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if again, _ := r2.Snapshot(); !slices.Equal(again, snap) {
		t.Fatal("the membership section does not round-trip")
	}
}

// MoveReplica is refused unless it names a group, a replica it has and a member it
// lacks, and while the group is moving.
func TestMoveReplicaRefusals(t *testing.T) {
	a := newApplier(t)
	a.nodes(4)
	r := a.create("t", 1, 3)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	p := r.Topic.Partitions[0]
	out := slices.DeleteFunc([]multiraft.NodeID{1, 2, 3, 4}, func(n multiraft.NodeID) bool { return slices.Contains(p.Replicas, n) })[0]
	for _, c := range []struct {
		g        multiraft.GroupID
		from, to multiraft.NodeID
		ok       bool
	}{
		{99, p.Replicas[0], out, false},                // no such group
		{p.Group, out, p.Replicas[0], false},           // from holds none
		{p.Group, p.Replicas[0], 9, false},             // to is no member
		{p.Group, p.Replicas[0], p.Replicas[1], false}, // to has one
		{p.Group, p.Replicas[1], out, true},
		{p.Group, p.Replicas[2], p.Replicas[1], false}, // moving already
	} {
		r := a.run(Command{Op: OpMoveReplica, Group: c.g, From: c.from, To: c.to})
		if (r.Err == nil) != c.ok || (!c.ok && !errors.Is(r.Err, ErrMove)) {
			t.Fatalf("move %d %d->%d: %v", c.g, c.from, c.to, r.Err)
		}
	}
	got := a.m.State().Topics["t"].Partitions[0]
	if got.Replicas[0] != p.Replicas[0] || got.Replicas[1] != out || !slices.Equal(got.Old, p.Replicas) {
		t.Fatalf("moved: %+v from %+v", got, p)
	}
}

// Rebalance, applied until it proposes nothing, leaves replica counts within one of each
// other, moving only what movable allows.
func TestRebalanceEvensCounts(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	if r := a.create("orders", 6, 3); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, q := range []string{"a", "b", "c"} {
		if r := a.run(Command{Op: OpCreateQueue, Name: q, RF: 3}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	a.run(Command{Op: OpAddNode, Node: Node{ID: 4}, Addr: "n4:1"})
	a.run(Command{Op: OpRegisterNode, Node: Node{ID: 4, KafkaAddr: "k4"}})
	queuesOnly := func(g GroupPlacement) bool { return g.Queue != "" }
	moves := 0
	for ; moves < 100; moves++ {
		g, from, to, ok := a.m.State().Rebalance(queuesOnly)
		if !ok {
			break
		}
		if r := a.run(Command{Op: OpMoveReplica, Group: g, From: from, To: to}); r.Err != nil {
			t.Fatal(r.Err)
		}
		reps := a.m.State().Groups()
		for _, gp := range reps {
			if gp.Group == g {
				a.run(Command{Op: OpMoveDone, Group: g, Replicas: gp.Replicas})
			}
		}
	}
	// 27 replicas on 4 nodes; only the 9 of the queues may move: node 4 gets 3 (one per
	// queue, since a group has at most one replica per node).
	load := a.m.State().replicaCounts()
	if load[4] != 3 || moves != 3 {
		t.Fatalf("queues only: %d moves, load %v", moves, load)
	}
	for ; moves < 100; moves++ {
		g, from, to, ok := a.m.State().Rebalance(func(GroupPlacement) bool { return true })
		if !ok {
			break
		}
		a.run(Command{Op: OpMoveReplica, Group: g, From: from, To: to})
		for _, gp := range a.m.State().Groups() {
			if gp.Group == g {
				a.run(Command{Op: OpMoveDone, Group: g, Replicas: gp.Replicas})
			}
		}
	}
	load = a.m.State().replicaCounts()
	lo, hi := 1<<30, 0
	for _, n := range load {
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 || load[4] < 6 {
		t.Fatalf("everything movable: load %v after %d moves", load, moves)
	}
}

// snapHook is a hook that can snapshot its offsets: the payloads applied, joined.
type snapHook struct{ hookLog }

func (h *snapHook) SnapshotGroupOffsets() ([]byte, error) {
	var b []byte
	for _, g := range h.got {
		b = append(b, g...)
		b = append(b, ';')
	}
	return b, nil
}

// A snapshot carries a snapshotting hook's offsets, and a node restored from it (a node
// just added, seeded by the snapshot) hands them to its own hook.
func TestSnapshotCarriesGroupOffsets(t *testing.T) {
	m := NewMachine(1)
	h := &snapHook{}
	if err := m.SetGroupOffsets(h); err != nil {
		t.Fatal(err)
	}
	applyOffsets(t, m, 3, "a")
	applyOffsets(t, m, 4, "b")
	snap, err := m.Snapshot()
	if err != nil || snap[0] != snapVersionMembersPending {
		t.Fatalf("snapshot: version %d, %v", snap[0], err)
	}
	joined := NewMachine(4)
	fresh := &hookLog{}
	if err := joined.SetGroupOffsets(fresh); err != nil {
		t.Fatal(err)
	}
	if err := joined.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if want := []string{"4:3:a;4:b;"}; !slices.Equal(fresh.got, want) {
		t.Fatalf("the restored node's hook got %q, want %q", fresh.got, want)
	}
}
