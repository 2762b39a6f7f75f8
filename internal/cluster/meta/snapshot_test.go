package meta

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// seedCommands is a history touching every op and refusal.
func seedCommands() []Command {
	return []Command{
		{Op: OpRegisterNode, Node: Node{ID: 2, KafkaAddr: "n2:9092", HTTPAddr: "n2:8080", SQSAddr: "n2:9324"}},
		{Op: OpCreateTopic, Name: "early", Partitions: 1, RF: 0}, // 1 node: rf 1
		{Op: OpRegisterNode, Node: Node{ID: 1, KafkaAddr: "n1:9092"}},
		{Op: OpRegisterNode, Node: Node{ID: 3, KafkaAddr: "n3:9092"}},
		{Op: OpCreateTopic, Name: "orders", Partitions: 6, RF: 3, Settings: []byte(`{"retention.ms":1}`)},
		{Op: OpCreateTopic, Name: "orders", Partitions: 1, RF: 1},
		{Op: OpCreateTopic, Name: "big", Partitions: 1, RF: 4},
		{Op: OpAddPartitions, Name: "orders", Partitions: 8},
		{Op: OpUpdateTopic, Name: "early", Settings: []byte(`{}`)},
		{Op: OpDeleteTopic, Name: "early"},
		{Op: OpCreateTopic, Name: "early", Partitions: 2, RF: 2},
		{Op: OpRegisterNode, Node: Node{ID: 1, KafkaAddr: "n1:19092"}},
		{Op: OpDeleteTopic, Name: "gone"},
		{Op: OpCreateQueue, Name: "jobs", RF: 0, Settings: []byte(`{"visibility_timeout":1}`)},
		{Op: OpCreateQueue, Name: "jobs", RF: 1}, // exists
		{Op: OpCreateQueue, Name: "spare", RF: 2},
		{Op: OpUpdateQueue, Name: "spare", Settings: []byte(`{}`)},
		{Op: OpDeleteQueue, Name: "spare"},
		{Op: OpCreateQueue, Name: "spare", RF: 1},
		{Op: OpDeleteQueue, Name: "nothing"},
		// Membership (membership.go): queue jobs is group 13.
		{Op: OpAddNode, Node: Node{ID: 4}, Addr: "n4:7100"},
		{Op: OpRegisterNode, Node: Node{ID: 4, KafkaAddr: "n4:9092"}},
		{Op: OpAddNode, Node: Node{ID: 4}, Addr: "n4:7100"}, // again: the same
		{Op: OpAddNode, Node: Node{ID: 2}, Addr: "n2:7100"}, // registered already
		{Op: OpMoveReplica, Group: 13, From: 1, To: 4},
		{Op: OpMoveReplica, Group: 13, From: 2, To: 4},               // moving already
		{Op: OpMoveDone, Group: 13, Replicas: []multiraft.NodeID{9}}, // not its replicas: nothing
		{Op: OpRemoveNode, Node: Node{ID: 3}},
		{Op: OpRegisterNode, Node: Node{ID: 3, KafkaAddr: "n3:9092"}},   // removed
		{Op: OpAddNode, Node: Node{ID: 3}, Addr: "n3:7100"},             // removed
		{Op: OpRemoveNode, Node: Node{ID: 9}},                           // unknown
		{Op: OpReassign, Group: 13, Replicas: []multiraft.NodeID{2, 3}}, // node 3 removed
		{Op: OpReassign, Group: 1, Replicas: []multiraft.NodeID{4, 2}},  // (reassign.go): no group 1
	}
}

func applyAll(t testing.TB, m *Machine, from uint64, cmds []Command) {
	t.Helper()
	for i, c := range cmds {
		c.Origin, c.Request = 9, uint64(i+1)
		idx := from + uint64(i)
		if err := m.Apply([]multiraft.Entry{{Index: idx, Term: 2, Data: c.Encode(nil)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// A replica that restores a snapshot taken at any point and applies the rest holds exactly
// what the replica that applied every entry holds.
func TestSnapshotRestoreEqualsApplied(t *testing.T) {
	cmds := seedCommands()
	full := NewMachine(1)
	applyAll(t, full, 1, cmds)
	want := full.State()
	if len(want.Topics) != 2 || len(want.Queues) != 2 || want.NextGroup != FirstDataGroup+1+8+2+3 {
		t.Fatalf("history did not do what it should: %+v", want)
	}
	for cut := 0; cut <= len(cmds); cut++ {
		part := NewMachine(1)
		applyAll(t, part, 1, cmds[:cut])
		snap, err := part.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		restored := NewMachine(1)
		changed := restored.Changed()
		if err := restored.Restore(snap); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		select {
		case <-changed:
		default:
			t.Fatalf("cut %d: Restore did not fire Changed", cut)
		}
		if !reflect.DeepEqual(restored.State(), part.State()) {
			t.Fatalf("cut %d: restored\n%+v\nsnapshotted\n%+v", cut, restored.State(), part.State())
		}
		applyAll(t, restored, uint64(cut)+1, cmds[cut:])
		if !reflect.DeepEqual(restored.State(), want) {
			t.Fatalf("cut %d: restored + tail\n%+v\napplied all\n%+v", cut, restored.State(), want)
		}
		again, _ := restored.Snapshot()
		if wantSnap, _ := full.Snapshot(); !bytes.Equal(again, wantSnap) {
			t.Fatalf("cut %d: snapshots differ", cut)
		}
	}
	// Restore(nil) is the empty catalog.
	if err := full.Restore(nil); err != nil || !reflect.DeepEqual(full.State(), emptyState()) {
		t.Fatalf("Restore(nil): %v %+v", err, full.State())
	}
}

func TestRestoreRefusesInconsistentSnapshot(t *testing.T) {
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands())
	good := m.State()
	bad := func(edit func(s *State)) []byte {
		s := good.clone()
		edit(s)
		return s.encode()
	}
	cases := map[string][]byte{
		"version":         {5},
		"truncated":       good.encode()[:10],
		"trailing":        append(good.encode(), 0),
		"next group":      bad(func(s *State) { s.NextGroup = 2 }),
		"nodes unordered": bad(func(s *State) { s.Nodes[0], s.Nodes[1] = s.Nodes[1], s.Nodes[0] }),
		"bad name": bad(func(s *State) {
			s.Topics[".."] = s.Topics["orders"]
		}),
		"queue group of a topic": bad(func(s *State) {
			q := *s.Queues["jobs"]
			q.Group = s.Topics["orders"].Partitions[0].Group
			s.Queues["jobs"] = &q
		}),
		"queue replica unknown": bad(func(s *State) {
			q := *s.Queues["jobs"]
			q.Replicas = []multiraft.NodeID{9}
			s.Queues["jobs"] = &q
		}),
	}
	for name, data := range cases {
		if err := NewMachine(1).Restore(data); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
}

// checkSnapshotCuts applies cmds in one go, and again with a snapshot at every cut from
// the first on: each snapshot has the version wantVersion gives for the state it holds,
// restores to that state (its CatalogChanged at the snapshot's index, as a restore sets
// it), and with the commands after the cut applied on top ends where cmds in one go end.
// It returns that state.
func checkSnapshotCuts(t *testing.T, cmds []Command, first int, wantVersion func(*State) byte) *State {
	t.Helper()
	full := NewMachine(1)
	applyAll(t, full, 1, cmds)
	want := full.State()
	for cut := first; cut <= len(cmds); cut++ {
		part := NewMachine(1)
		applyAll(t, part, 1, cmds[:cut])
		snap, err := part.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if v := wantVersion(part.State()); snap[0] != v {
			t.Fatalf("cut %d: snapshot version %d, want %d", cut, snap[0], v)
		}
		restored := NewMachine(1)
		if err := restored.Restore(snap); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if got := restored.State().CatalogChanged; got != part.State().Index {
			t.Fatalf("cut %d: restored catalog changed at %d, want the snapshot's index %d", cut, got, part.State().Index)
		}
		if !reflect.DeepEqual(sameCatalogChanged(restored.State(), part.State()), part.State()) {
			t.Fatalf("cut %d: restored\n%+v\nsnapshotted\n%+v", cut, restored.State(), part.State())
		}
		applyAll(t, restored, uint64(cut)+1, cmds[cut:])
		if !reflect.DeepEqual(sameCatalogChanged(restored.State(), want), want) {
			t.Fatalf("cut %d: restored + tail\n%+v\napplied all\n%+v", cut, restored.State(), want)
		}
	}
	return want
}

// sameCatalogChanged is s with ref's CatalogChanged, which a restore does not keep.
func sameCatalogChanged(s, ref *State) *State {
	c := *s
	c.CatalogChanged = ref.CatalogChanged
	return &c
}
