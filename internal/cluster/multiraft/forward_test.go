package multiraft_test

import (
	"errors"
	"slices"
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
