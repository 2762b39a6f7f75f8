package multiraft_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// PlanMove's steps from a configuration, as its leader sees it.
func TestPlanMove(t *testing.T) {
	caught := map[multiraft.NodeID]uint64{1: 100, 2: 100, 3: 100, 4: 100, 5: 100}
	repl := map[multiraft.NodeID]bool{1: true, 2: true, 3: true, 4: true, 5: true}
	ids := func(n ...multiraft.NodeID) []multiraft.NodeID { return n }
	lead := func(self multiraft.NodeID, voters, learners []multiraft.NodeID) multiraft.Membership {
		return multiraft.Membership{Leader: self, IsLeader: true, Commit: 100, Voters: voters, Learners: learners,
			Match: caught, Replicating: repl}
	}
	behind := lead(1, ids(1, 2, 3), ids(4))
	behind.Match = map[multiraft.NodeID]uint64{1: 100, 2: 100, 3: 100, 4: 10}
	joint := lead(1, ids(1, 2, 4), nil)
	joint.Outgoing = ids(1, 2, 3)
	tests := []struct {
		name   string
		m      multiraft.Membership
		target []multiraft.NodeID
		self   multiraft.NodeID
		want   string
	}{
		{"not the leader", multiraft.Membership{Voters: ids(1, 2, 3)}, ids(1, 2, 4), 1, "wait: not the leader"},
		{"joint", joint, ids(1, 2, 4), 1, "wait: joint consensus"},
		{"add a learner", lead(1, ids(1, 2, 3), nil), ids(1, 2, 4), 1, "learner n4"},
		{"learner behind", behind, ids(1, 2, 4), 1, "wait: learner n4 catching up"},
		{"promote and remove at once", lead(1, ids(1, 2, 3), ids(4)), ids(1, 2, 4), 1, "voter n4, remove n3"},
		{"the leader leaves: transfer first", lead(3, ids(1, 2, 3), ids(4)), ids(1, 2, 4), 3, "transfer n1"},
		{"stray learner", lead(1, ids(1, 2, 4), ids(3)), ids(1, 2, 4), 1, "remove n3"},
		{"grow", lead(1, ids(1), ids(2)), ids(1, 2), 1, "voter n2"},
		{"shrink", lead(1, ids(1, 2, 3), nil), ids(1, 2), 1, "remove n3"},
		{"done, order aside", lead(2, ids(1, 2, 4), nil), ids(4, 2, 1), 2, "done"},
	}
	for _, tc := range tests {
		if got := multiraft.PlanMove(tc.m, tc.target, tc.self).String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A move survives a crash of the leader after any number of its steps: the next leader
// finishes it from the configuration it finds, with the target voters, and nothing
// committed is lost (checkSafety).
func TestMoveResumesAfterLeaderCrash(t *testing.T) {
	target := []multiraft.NodeID{4, 2, 3} // n4 replaces n1, the first leader
	for crashAt := 0; crashAt <= 4; crashAt++ {
		t.Run(fmt.Sprint("after step ", crashAt), func(t *testing.T) {
			c := newCluster(t, int64(crashAt)+1, 4, multiraft.Config{SnapshotEntries: 4})
			voters := []multiraft.NodeID{1, 2, 3}
			c.createGroup(1, voters, voters)
			c.createGroup(1, []multiraft.NodeID{4}, nil)
			if err := c.nodes[1].host.Campaign(1); err != nil {
				t.Fatal(err)
			}
			c.settle()
			proposeSome(t, c, 5)
			steps := 0
			for i := 0; i < 400; i++ {
				lead, _ := c.leader(1)
				if lead == 0 {
					c.tick()
					continue
				}
				if steps == crashAt {
					c.kill(lead)
					for range 40 {
						c.tick()
					}
					c.restart(lead)
					steps++ // crash once
					continue
				}
				step, err := c.nodes[lead].host.StepMove(1, target)
				if err != nil {
					t.Fatalf("step: %v", err)
				}
				if step.Kind == multiraft.MoveDone {
					break
				}
				if step.Kind != multiraft.MoveWait {
					steps++
				}
				c.tick()
			}
			for range 20 {
				c.tick()
			}
			for _, nd := range c.up() {
				m, err := nd.host.Membership(1)
				if err != nil {
					t.Fatal(err)
				}
				if got := slices.Sorted(slices.Values(m.Voters)); !slices.Equal(got, []multiraft.NodeID{2, 3, 4}) || len(m.Learners) > 0 || m.Joint() {
					t.Fatalf("n%d: voters %v learners %v joint %v", nd.id, m.Voters, m.Learners, m.Joint())
				}
			}
			proposeSome(t, c, 3)
			if err := c.checkSafety(false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func proposeSome(t *testing.T, c *cluster, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		for try := 0; ; try++ {
			lead, _ := c.leader(1)
			if lead != 0 {
				p, err := c.nodes[lead].host.ProposeAsync(1, []byte(fmt.Sprint("x", i)))
				if err == nil && c.await(p, 50) {
					if idx, err := p.Result(); err == nil {
						c.record(1, lead, idx, fmt.Sprint("x", i))
						break
					}
				}
			}
			if try > 50 {
				t.Fatalf("proposal %d never committed", i)
			}
			c.tick()
		}
	}
}
