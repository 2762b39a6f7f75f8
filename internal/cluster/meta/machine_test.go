package meta

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// applier feeds commands to a machine as the host would, one entry each.
type applier struct {
	t     testing.TB
	m     *Machine
	index uint64
	req   uint64
}

func newApplier(t testing.TB) *applier { return &applier{t: t, m: NewMachine(1)} }

// run applies c as node 1's proposal and returns its result.
func (a *applier) run(c Command) Result {
	a.t.Helper()
	a.index++
	a.req++
	c.Origin, c.Request = 1, a.req
	if err := a.m.Apply([]multiraft.Entry{{Index: a.index, Term: 1, Data: c.Encode(nil)}}); err != nil {
		a.t.Fatalf("apply %+v: %v", c, err)
	}
	r, ok := a.m.take(a.index, a.req)
	if !ok {
		a.t.Fatalf("no result for entry %d", a.index)
	}
	return r
}

func (a *applier) nodes(n int) {
	for i := 1; i <= n; i++ {
		if r := a.run(Command{Op: OpRegisterNode, Node: Node{ID: multiraft.NodeID(i), KafkaAddr: "k"}}); r.Err != nil {
			a.t.Fatal(r.Err)
		}
	}
}

func (a *applier) create(name string, parts, rf int32) Result {
	return a.run(Command{Op: OpCreateTopic, Name: name, Partitions: parts, RF: rf})
}

// leaderCounts counts, per node, the partitions it is the first replica of.
func leaderCounts(t *Topic) map[multiraft.NodeID]int {
	c := map[multiraft.NodeID]int{}
	for _, p := range t.Partitions {
		c[p.Replicas[0]]++
	}
	return c
}

func TestPlacement(t *testing.T) {
	tests := []struct {
		name          string
		nodes         int
		parts, rf     int32
		err           error
		wantRF        int
		leadersByNode int // each node is the first replica of this many partitions (0: skip)
	}{
		{name: "3 nodes 6 partitions rf3", nodes: 3, parts: 6, rf: 3, wantRF: 3, leadersByNode: 2},
		{name: "3 nodes 6 partitions rf1", nodes: 3, parts: 6, rf: 1, wantRF: 1, leadersByNode: 2},
		{name: "5 nodes 10 partitions rf3", nodes: 5, parts: 10, rf: 3, wantRF: 3, leadersByNode: 2},
		{name: "default rf is 3 of 5", nodes: 5, parts: 5, rf: 0, wantRF: 3, leadersByNode: 1},
		{name: "default rf is 1 of 1", nodes: 1, parts: 2, rf: -1, wantRF: 1, leadersByNode: 2},
		{name: "default rf is 2 of 2", nodes: 2, parts: 4, rf: 0, wantRF: 2, leadersByNode: 2},
		{name: "rf above nodes", nodes: 2, parts: 1, rf: 3, err: ErrReplicationFactor},
		{name: "no nodes registered", nodes: 0, parts: 1, rf: 0, err: ErrReplicationFactor},
		{name: "zero partitions", nodes: 3, parts: 0, rf: 1, err: ErrPartitions},
		{name: "too many partitions", nodes: 3, parts: MaxPartitions + 1, rf: 1, err: ErrPartitions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newApplier(t)
			a.nodes(tc.nodes)
			r := a.create("orders", tc.parts, tc.rf)
			if !errors.Is(r.Err, tc.err) {
				t.Fatalf("err %v, want %v", r.Err, tc.err)
			}
			st := a.m.State()
			if tc.err != nil {
				if len(st.Topics) != 0 || st.NextGroup != FirstDataGroup {
					t.Fatalf("refused create changed the catalog: %+v", st)
				}
				return
			}
			top := st.Topics["orders"]
			if top != r.Topic || len(top.Partitions) != int(tc.parts) || top.ReplicationFactor() != tc.wantRF {
				t.Fatalf("topic %+v (result %p, state %p)", top, r.Topic, top)
			}
			for p, part := range top.Partitions {
				if part.Group != FirstDataGroup+multiraft.GroupID(p) {
					t.Errorf("partition %d: group %d", p, part.Group)
				}
				if seen := slices.Compact(slices.Sorted(slices.Values(part.Replicas))); len(seen) != tc.wantRF {
					t.Errorf("partition %d: replicas %v not distinct", p, part.Replicas)
				}
			}
			for n, c := range leaderCounts(top) {
				if c != tc.leadersByNode {
					t.Errorf("node %d first replica of %d partitions, want %d: %+v", n, c, tc.leadersByNode, top.Partitions)
				}
			}
			if len(leaderCounts(top)) != min(tc.nodes, int(tc.parts)) {
				t.Errorf("leaders on %d nodes: %+v", len(leaderCounts(top)), top.Partitions)
			}
		})
	}
}

// Different topics start their rotation at different nodes: one-partition topics do not all
// pile their leader on the lowest node id.
func TestPlacementSpreadsTopics(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	leaders := map[multiraft.NodeID]int{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		r := a.create(name, 1, 1)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		leaders[r.Topic.Partitions[0].Replicas[0]]++
	}
	if len(leaders) != 3 {
		t.Fatalf("12 one-partition topics led by %v: the start does not depend on the name", leaders)
	}
}

func TestTopicCommands(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	r := a.create("orders", 2, 3)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	first := r.Topic
	firstParts := slices.Clone(first.Partitions)
	if r := a.create("orders", 1, 1); !errors.Is(r.Err, ErrTopicExists) {
		t.Fatalf("create again: %v", r.Err)
	}
	if r := a.create("bad/name", 1, 1); !errors.Is(r.Err, ErrInvalidTopicName) {
		t.Fatalf("bad name: %v", r.Err)
	}
	// AddPartitions: a smaller or equal total is refused, a larger one places the new ones.
	for _, total := range []int32{1, 2} {
		if r := a.run(Command{Op: OpAddPartitions, Name: "orders", Partitions: total}); !errors.Is(r.Err, ErrPartitions) {
			t.Fatalf("add to %d: %v", total, r.Err)
		}
	}
	if r := a.run(Command{Op: OpAddPartitions, Name: "nope", Partitions: 5}); !errors.Is(r.Err, ErrUnknownTopic) {
		t.Fatalf("add to unknown: %v", r.Err)
	}
	r = a.run(Command{Op: OpAddPartitions, Name: "orders", Partitions: 6})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	grown := r.Topic
	if len(grown.Partitions) != 6 || !reflect.DeepEqual(grown.Partitions[:2], firstParts) {
		t.Fatalf("grown %+v, existing partitions were %+v", grown.Partitions, firstParts)
	}
	if got := leaderCounts(grown); len(got) != 3 || got[1] != 2 || got[2] != 2 || got[3] != 2 {
		t.Fatalf("6 partitions (2 then 4 added) lead %v, want 2 each", got)
	}
	if grown.Version != a.index || grown.ID != first.ID {
		t.Fatalf("version %d (index %d), id changed %v", grown.Version, a.index, grown.ID != first.ID)
	}
	// The old value handed out is untouched (State is immutable).
	if len(first.Partitions) != 2 || !reflect.DeepEqual(first.Partitions, firstParts) {
		t.Fatalf("AddPartitions modified the topic handed out before: %+v", first.Partitions)
	}
	r = a.run(Command{Op: OpUpdateTopic, Name: "orders", Settings: []byte(`{"retention":1}`)})
	if r.Err != nil || string(r.Topic.Settings) != `{"retention":1}` || r.Topic.Version != a.index {
		t.Fatalf("update: %+v %v", r.Topic, r.Err)
	}
	if r := a.run(Command{Op: OpUpdateTopic, Name: "nope"}); !errors.Is(r.Err, ErrUnknownTopic) {
		t.Fatalf("update unknown: %v", r.Err)
	}
	if r := a.run(Command{Op: OpDeleteTopic, Name: "nope"}); !errors.Is(r.Err, ErrUnknownTopic) {
		t.Fatalf("delete unknown: %v", r.Err)
	}
	next := a.m.State().NextGroup
	if r := a.run(Command{Op: OpDeleteTopic, Name: "orders"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Group ids are never reused, and a topic created again under the name is a new topic.
	r = a.create("orders", 2, 1)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Topic.Partitions[0].Group != next || a.m.State().NextGroup != next+2 {
		t.Fatalf("recreated topic's groups %+v, next was %d", r.Topic.Partitions, next)
	}
	if r.Topic.ID == first.ID {
		t.Fatal("recreated topic has the old topic's id")
	}
}

func TestRegisterNodeUpserts(t *testing.T) {
	a := newApplier(t)
	for _, id := range []multiraft.NodeID{3, 1, 2} {
		a.run(Command{Op: OpRegisterNode, Node: Node{ID: id, KafkaAddr: "old"}})
	}
	a.run(Command{Op: OpRegisterNode, Node: Node{ID: 2, KafkaAddr: "k2", HTTPAddr: "h2", SQSAddr: "s2"}})
	if r := a.run(Command{Op: OpRegisterNode}); !errors.Is(r.Err, ErrInvalidNode) {
		t.Fatalf("node 0: %v", r.Err)
	}
	want := []Node{{ID: 1, KafkaAddr: "old"}, {ID: 2, KafkaAddr: "k2", HTTPAddr: "h2", SQSAddr: "s2"}, {ID: 3, KafkaAddr: "old"}}
	if got := a.m.State().Nodes; !reflect.DeepEqual(got, want) {
		t.Fatalf("nodes %+v", got)
	}
}

func TestChangedFiresAndStateIsNew(t *testing.T) {
	a := newApplier(t)
	ch, before := a.m.Changed(), a.m.State()
	a.nodes(1)
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by an applied entry")
	}
	if len(before.Nodes) != 0 || before.Index != 0 {
		t.Fatalf("the state handed out before was modified: %+v", before)
	}
	if a.m.State().Index != 1 {
		t.Fatalf("index %d", a.m.State().Index)
	}
	select {
	case <-a.m.Changed():
		t.Fatal("the new Changed channel is already closed")
	default:
	}
}

func TestMalformedEntryStopsApply(t *testing.T) {
	m := NewMachine(1)
	for _, data := range [][]byte{{}, {9, 1}, {commandVersion, 99, 0, 0}, {commandVersion, byte(OpDeleteTopic), 0, 0, 5, 'a'}} {
		if err := m.Apply([]multiraft.Entry{{Index: 1, Data: data}}); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%v: %v", data, err)
		}
	}
}

func TestValidTopicName(t *testing.T) {
	long := string(make([]byte, 250))
	for name, want := range map[string]bool{
		"orders": true, "a.b_c-D9": true, "": false, ".": false, "..": false, "...": true,
		"a b": false, "a/b": false, "é": false, long[:249] + "": false, // NULs
	} {
		if got := ValidTopicName(name); got != want {
			t.Errorf("%q: %v", name, got)
		}
	}
	ok := make([]byte, 249)
	for i := range ok {
		ok[i] = 'x'
	}
	if !ValidTopicName(string(ok)) || ValidTopicName(string(ok)+"x") {
		t.Error("length limit is not 249")
	}
}
