package multiraft_test

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestProposeForward: a follower's forwarded proposal is applied on every node without a
// result at the follower; with no leader known it is refused with NotLeaderError.
func TestProposeForward(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{})
	ids := []multiraft.NodeID{1, 2, 3}
	c.createGroup(1, ids, ids)
	var nl *multiraft.NotLeaderError
	if err := c.nodes[2].host.ProposeForward(1, []byte("early")); !errors.As(err, &nl) || nl.Leader != 0 {
		t.Fatalf("forward with no leader known: %v, want NotLeaderError with no leader", err)
	}
	if err := c.nodes[1].host.Campaign(1); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		c.tick()
	}
	leader, _ := c.leader(1)
	if leader == 0 {
		t.Fatal("no leader")
	}
	follower := ids[leader%3] // another node
	if err := c.nodes[follower].host.ProposeForward(1, []byte("via-follower")); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[leader].host.ProposeForward(1, []byte("via-leader")); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		c.tick()
	}
	for _, id := range ids {
		var got []string
		for _, e := range c.nodes[id].sms[1].entries() {
			got = append(got, string(e.Data))
		}
		// The forwarded one reaches the leader's log a round later: any order.
		slices.Sort(got)
		if !slices.Equal(got, []string{"via-follower", "via-leader"}) {
			t.Errorf("n%d applied %q, want via-follower and via-leader", id, got)
		}
	}
}

// wanter is a recorder that wants a snapshot whenever want is set, and counts them.
type wanter struct {
	*recorder
	want  *atomic.Bool
	snaps atomic.Int32
}

func (w *wanter) WantSnapshot() bool           { return w.want.Load() }
func (w *wanter) CompactTo(snap uint64) uint64 { return 0 }
func (w *wanter) Snapshot() ([]byte, error) {
	w.snaps.Add(1)
	return w.recorder.Snapshot()
}

// TestProposeEmpty: an empty entry proposed from a follower of an idle group reaches no
// state machine, yet every replica applies it and takes the snapshot its state machine
// wants (far before SnapshotEntries); without it nobody takes one. A follower that was cut
// off takes it as it catches up.
func TestProposeEmpty(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{SnapshotEntries: 1000})
	var want atomic.Bool
	ws := map[multiraft.NodeID]*wanter{}
	for _, id := range c.ids {
		nd := c.nodes[id]
		ws[id] = &wanter{recorder: &recorder{}, want: &want}
		if err := nd.host.CreateGroup(1, c.ids, ws[id]); err != nil {
			t.Fatal(err)
		}
		nd.sms[1], nd.groups = ws[id].recorder, append(nd.groups, 1)
	}
	_ = c.nodes[1].host.Campaign(1)
	c.settle()
	leader, _ := c.leader(1)
	for i := range 3 {
		p, err := c.nodes[leader].host.ProposeAsync(1, []byte(fmt.Sprint(i)))
		if err != nil || !c.await(p, 50) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	want.Store(true)
	for range 100 { // idle: nothing applied, nothing taken
		c.tick()
	}
	cut := othersThan(c.ids, leader)
	for _, id := range c.ids {
		if n := ws[id].snaps.Load(); n != 0 {
			t.Fatalf("n%d took %d snapshots with nothing applied", id, n)
		}
	}
	c.net.Partition([]multiraft.NodeID{leader, cut[0]}, []multiraft.NodeID{cut[1]})
	if err := c.nodes[cut[0]].host.ProposeEmpty(1); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		c.tick()
	}
	c.net.Heal()
	for range 200 {
		c.tick()
	}
	for _, id := range c.ids {
		if n := ws[id].snaps.Load(); n != 1 {
			t.Errorf("n%d took %d snapshots after the empty entry, want 1", id, n)
		}
		if got := len(c.nodes[id].sms[1].entries()); got != 3 {
			t.Errorf("n%d's state machine was given %d entries, want the 3 proposed", id, got)
		}
	}
}

// othersThan is the nodes of ids other than one.
func othersThan(ids []multiraft.NodeID, one multiraft.NodeID) []multiraft.NodeID {
	var out []multiraft.NodeID
	for _, id := range ids {
		if id != one {
			out = append(out, id)
		}
	}
	return out
}
