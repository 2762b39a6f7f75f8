package multiraft_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// preparer is a recorder whose snapshot preparation waits for release (or the host's end).
type preparer struct {
	*recorder
	calls   atomic.Int32
	release chan struct{}
}

func (p *preparer) PrepareSnapshot(ctx context.Context, _ []byte) error {
	p.calls.Add(1)
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestSnapshotPreparedOffReadyLoop: a follower cut off past the compacted log of group 1
// is sent a snapshot, which its state machine prepares (a partition pulling records) for as
// long as the test holds it. Meanwhile the same host's Ready loop goes on: the follower
// applies group 2's new entries, and group 1 takes no Ready (nothing of it is applied), and
// a resent snapshot is not prepared twice at once. Released, the snapshot is stepped,
// restored, and the follower catches up. A host closed during a preparation cancels it.
func TestSnapshotPreparedOffReadyLoop(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{SnapshotEntries: 10, DisableQuiesce: true})
	var slow *preparer
	for _, id := range c.ids {
		nd := c.nodes[id]
		rec := &recorder{}
		var sm multiraft.StateMachine = rec
		if id == 3 {
			slow = &preparer{recorder: rec, release: make(chan struct{})}
			sm = slow
		}
		if err := nd.host.CreateGroup(1, c.ids, sm); err != nil {
			t.Fatal(err)
		}
		nd.sms[1], nd.groups = rec, append(nd.groups, 1)
	}
	c.createGroup(2, c.ids, c.ids)
	_ = c.nodes[1].host.Campaign(1)
	_ = c.nodes[1].host.Campaign(2)
	c.settle()
	propose := func(g multiraft.GroupID, i int) {
		t.Helper()
		p, err := c.nodes[1].host.ProposeAsync(g, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if !c.await(p, 50) {
			t.Fatalf("group %d: entry %d not applied", g, i)
		}
	}
	c.net.Partition([]multiraft.NodeID{1, 2}, []multiraft.NodeID{3})
	for i := range 60 {
		propose(1, i)
	}
	c.net.Heal()
	for i := 0; slow.calls.Load() == 0; i++ {
		if i == 200 {
			t.Fatal("no snapshot reached the follower's preparation")
		}
		c.tick()
	}
	applied1 := len(c.nodes[3].sms[1].entries())
	before := len(c.nodes[3].sms[2].entries())
	for i := range 5 {
		propose(2, i)
	}
	for i := 0; len(c.nodes[3].sms[2].entries()) < before+5; i++ {
		if i == 100 {
			t.Fatal("the follower's host stopped applying group 2 while group 1's snapshot was prepared")
		}
		c.tick()
	}
	if got := len(c.nodes[3].sms[1].entries()); got != applied1 {
		t.Fatalf("group 1 applied %d entries during its preparation (had %d)", got, applied1)
	}
	if n := slow.calls.Load(); n != 1 {
		t.Fatalf("%d preparations, want 1 at a time", n)
	}
	if c.nodes[3].host.BackgroundWork() != 1 {
		t.Fatal("the host does not count its preparation under way")
	}
	close(slow.release)
	for range 200 {
		if len(c.nodes[3].sms[1].entries()) == len(c.nodes[1].sms[1].entries()) {
			break
		}
		c.tick()
	}
	if got, want := len(c.nodes[3].sms[1].entries()), len(c.nodes[1].sms[1].entries()); got != want {
		t.Fatalf("follower applied %d entries of group 1, the leader %d", got, want)
	}
	if c.nodes[3].host.Stats().SnapsTaken == 0 {
		t.Fatal("the follower restored no snapshot")
	}
}

// TestClosedHostCancelsPreparation: Close cancels a preparation under way and returns once
// it has.
func TestClosedHostCancelsPreparation(t *testing.T) {
	c := newCluster(t, 2, 3, multiraft.Config{SnapshotEntries: 10, DisableQuiesce: true})
	slow := &preparer{recorder: &recorder{}, release: make(chan struct{})}
	for _, id := range c.ids {
		var sm multiraft.StateMachine = &recorder{}
		if id == 3 {
			sm = slow
		}
		if err := c.nodes[id].host.CreateGroup(1, c.ids, sm); err != nil {
			t.Fatal(err)
		}
		c.nodes[id].groups = append(c.nodes[id].groups, 1)
	}
	_ = c.nodes[1].host.Campaign(1)
	c.settle()
	c.net.Partition([]multiraft.NodeID{1, 2}, []multiraft.NodeID{3})
	for i := range 40 {
		p, err := c.nodes[1].host.ProposeAsync(1, []byte(fmt.Sprint(i)))
		if err != nil || !c.await(p, 50) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	c.net.Heal()
	for i := 0; slow.calls.Load() == 0; i++ {
		if i == 200 {
			t.Fatal("no snapshot reached the follower's preparation")
		}
		c.tick()
	}
	c.nodes[3].host.Close() // returns only once the preparation saw its context end
	if n := c.nodes[3].host.BackgroundWork(); n != 0 {
		t.Fatalf("%d preparations still under way after Close", n)
	}
}
