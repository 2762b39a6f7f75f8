package tcptransport_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/faultproxy"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestThreeHostsOverTCP: three hosts over loopback TCP elect leaders in many groups (by
// themselves: nobody campaigns) and commit proposals in all of them, identically on every
// node, with nothing dropped on the way and batches coalesced into fewer writes.
func TestThreeHostsOverTCP(t *testing.T) {
	c := newCluster(t, opts{nodes: 3, groups: 16})
	checkCommitsEverywhere(t, c, 3)
	for _, id := range c.ids {
		st := c.nodes[id].tr.Stats()
		if st.Dropped != 0 || st.DroppedMessages != 0 || st.BadFrames != 0 || st.Refused != 0 {
			t.Errorf("n%d: %+v: want nothing dropped or refused on a healthy cluster", id, st)
		}
		if st.BatchesReceived == 0 || st.BytesSent == 0 || st.Writes > st.BatchesSent {
			t.Errorf("n%d: %+v", id, st)
		}
	}
}

// checkCommitsEverywhere commits per entries to every group through its leader and checks
// every node applied them all, in order.
func checkCommitsEverywhere(t *testing.T, c *cluster, per int) {
	t.Helper()
	c.leaders(c.ids, 10*time.Second)
	for i := range per {
		for _, g := range c.groupIDs() {
			c.propose(g, fmt.Sprintf("g%d-%d", g, i), c.ids, 10*time.Second)
		}
	}
	for g, applied := range c.converged(10 * time.Second) {
		var want []string
		for i := range per {
			want = append(want, fmt.Sprintf("g%d-%d", g, i))
		}
		if !slices.Equal(applied, want) {
			t.Fatalf("group %d applied %q, want %q", g, applied, want)
		}
	}
}

// TestPartitionThroughProxy: the leader of every group is cut away from the others (its
// connections closed and refused, or blackholed: up but swallowing everything), or hears
// nobody while they still hear it (one way). It stops committing: nothing proposed to it
// is ever applied anywhere. The majority elects new leaders and commits (one way, once the
// old leader's CheckQuorum has stepped it down and its heartbeats stop). After healing
// every node converges on the majority's history.
func TestPartitionThroughProxy(t *testing.T) {
	for _, mode := range []struct {
		name   string
		m      faultproxy.Mode
		oneWay bool // only the links into the leader's node
	}{{"cut", faultproxy.Cut, false}, {"blackhole", faultproxy.Blackhole, false}, {"one way", faultproxy.Cut, true}} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, opts{nodes: 3, groups: 8, proxies: true})
			for _, g := range c.groupIDs() {
				if err := c.nodes[1].host.Campaign(g); err != nil {
					t.Fatal(err)
				}
			}
			c.leaders([]multiraft.NodeID{1}, 10*time.Second)
			for _, g := range c.groupIDs() {
				c.propose(g, "before", []multiraft.NodeID{1}, 10*time.Second)
			}
			c.converged(10 * time.Second)

			if mode.oneWay {
				c.isolateInbound(1, mode.m)
			} else {
				c.isolate(1, mode.m)
			}
			minority := map[multiraft.GroupID]*multiraft.Proposal{}
			for _, g := range c.groupIDs() {
				p, err := c.nodes[1].host.ProposeAsync(g, []byte("minority"))
				if err != nil && !isNotLeader(err) {
					t.Fatal(err)
				}
				if p != nil {
					minority[g] = p
				}
			}
			majority := []multiraft.NodeID{2, 3}
			c.leaders(majority, 10*time.Second)
			for _, g := range c.groupIDs() {
				c.propose(g, "majority", majority, 10*time.Second)
			}
			for _, p := range minority {
				select {
				case <-p.Done():
					if _, err := p.Result(); err == nil {
						t.Fatal("the isolated leader acknowledged a proposal")
					}
				default: // still waiting: fine, as long as it never succeeds
				}
			}

			c.isolate(1, faultproxy.Pass)
			applied := c.converged(15 * time.Second)
			for _, g := range c.groupIDs() {
				// One way, the old leader's entry reached the others' logs before it stepped
				// down, and a new leader may commit it with its own: it is then in every
				// history, ahead of the majority's. It was never acknowledged while isolated.
				reached := mode.oneWay && slices.Equal(applied[g], []string{"before", "minority", "majority"})
				if !reached && !slices.Equal(applied[g], []string{"before", "majority"}) {
					t.Fatalf("group %d applied %q, want the majority's history", g, applied[g])
				}
				p := minority[g]
				if p == nil {
					continue
				}
				select {
				case <-p.Done():
					// Not committed: an error. Committed: applied, or outcome unknown — its
					// node failed it as soon as it stepped down (multiraft, "Proposals").
					_, err := p.Result()
					if (err == nil && !reached) || (err != nil && reached && !errors.Is(err, multiraft.ErrOutcomeUnknown)) {
						t.Fatalf("group %d: the isolated leader's proposal resolved with error %v, its entry committed: %v", g, err, reached)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a proposal of the isolated leader never resolved after healing")
				}
			}
			// Traffic flows again to and from n1; after a cut, connections were remade.
			c.propose(1, "after", c.ids, 10*time.Second)
			c.converged(10 * time.Second)
			var reconnects uint64
			for _, n := range c.nodes {
				reconnects += n.tr.Stats().Reconnects
			}
			if mode.m == faultproxy.Cut && reconnects == 0 {
				t.Error("no reconnect counted after a cut")
			}
		})
	}
}

// TestPeerRestart: a node that stops and comes back on the same address (its engine kept
// what it synced) is reconnected to by its peers and catches up, whether it was a follower
// or the leader of every group.
func TestPeerRestart(t *testing.T) {
	for _, victim := range []multiraft.NodeID{3, 1} {
		t.Run(fmt.Sprintf("n%d", victim), func(t *testing.T) {
			c := newCluster(t, opts{nodes: 3, groups: 4})
			for _, g := range c.groupIDs() {
				if err := c.nodes[1].host.Campaign(g); err != nil {
					t.Fatal(err)
				}
			}
			c.leaders([]multiraft.NodeID{1}, 10*time.Second)
			for _, g := range c.groupIDs() {
				c.propose(g, "one", c.ids, 10*time.Second)
			}
			c.nodes[victim].stop()
			var rest []multiraft.NodeID
			for _, id := range c.ids {
				if id != victim {
					rest = append(rest, id)
				}
			}
			for _, g := range c.groupIDs() {
				c.propose(g, "two", rest, 10*time.Second)
			}
			c.restart(victim)
			for _, g := range c.groupIDs() {
				c.propose(g, "three", c.ids, 10*time.Second)
			}
			for g, applied := range c.converged(10 * time.Second) {
				if !slices.Equal(applied, []string{"one", "two", "three"}) {
					t.Fatalf("group %d applied %q", g, applied)
				}
			}
			// A peer that was connected to the victim before it stopped (at least the
			// leader's node, or the new leader's) counts a reconnect.
			var reconnects uint64
			for _, id := range rest {
				reconnects += c.nodes[id].tr.Stats().Reconnects
			}
			if reconnects == 0 {
				t.Errorf("no reconnect to the restarted n%d counted", victim)
			}
		})
	}
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
