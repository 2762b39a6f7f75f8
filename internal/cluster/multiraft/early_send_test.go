package multiraft_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// hookDisk is a disk whose engine's next Sync runs hook instead of syncing, once: the
// moment between a round's sends and its sync, frozen for a test to act in.
type hookDisk struct {
	disk
	hook func() error
}

func (d *hookDisk) engine() (multiraft.Engine, error) {
	e, err := d.disk.engine()
	if err != nil {
		return nil, err
	}
	return &hookEngine{Engine: e, d: d}, nil
}

type hookEngine struct {
	multiraft.Engine
	d *hookDisk
}

func (e *hookEngine) Sync(written []multiraft.Storage) error {
	if h := e.d.hook; h != nil {
		e.d.hook = nil
		return h()
	}
	return e.Engine.Sync(written)
}

var errPowerCut = errors.New("test: power cut before the fsync")

// TestLeaderCrashBetweenSendAndSync: a leader sends its appends before its own fsync
// (ready.go), so a follower can hold an entry durably, and answer for it, while the
// leader's copy is still unsynced. The leader must not count that copy toward the quorum:
// with one follower's answer in and the other follower cut off, the entry is on one disk
// only. Here the leader's round is frozen in its sync, the follower's answer delivered, and
// the commit index checked; then the power is cut before the fsync (the unsynced writes
// torn or gone, on the crashable file system), the follower that holds the entry dies, and
// the leader comes back with the cut-off node: whatever was acknowledged must be there.
func TestLeaderCrashBetweenSendAndSync(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { leaderCrashBetweenSendAndSync(t, seed) })
	}
}

func leaderCrashBetweenSendAndSync(t *testing.T, seed int64) {
	mk := newStoreDisk(seed)
	disks := map[multiraft.NodeID]*hookDisk{}
	c := newClusterOn(t, seed, 3, multiraft.Config{}, func(id multiraft.NodeID) disk {
		disks[id] = &hookDisk{disk: mk(id)}
		return disks[id]
	})
	c.createGroup(1, c.ids, c.ids)
	n1, n2 := c.nodes[1].host, c.nodes[2].host
	if err := n1.Campaign(1); err != nil {
		t.Fatal(err)
	}
	c.settle()
	if lead, _ := c.leader(1); lead != 1 {
		t.Fatalf("leader %d, want n1", lead)
	}
	pa, err := n1.ProposeAsync(1, []byte("a"))
	if err != nil || !c.await(pa, 50) {
		t.Fatalf("propose a: %v", err)
	}
	ia, err := pa.Result()
	if err != nil {
		t.Fatal(err)
	}
	c.record(1, 1, ia, "a")

	c.net.Partition([]multiraft.NodeID{1, 2}, []multiraft.NodeID{3})
	px, err := n1.ProposeAsync(1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	var commit uint64
	var n2Got bool
	disks[1].hook = func() error {
		// n1's append left before this sync: n2 logs x, syncs it, and answers
		for range 4 {
			c.net.Deliver()
			if _, err := n2.ProcessReady(); err != nil {
				t.Error(err)
			}
		}
		c.net.Deliver() // n2's answer reaches n1 (its Receive steps it into raft)
		st, _ := n1.Status(1)
		commit = st.Commit
		if st, err := disks[2].disk.(*storeDisk).eng.Group(1); err == nil {
			last, _ := st.LastIndex()
			n2Got = last > ia // (and synced: its round is over)
		}
		return errPowerCut
	}
	if _, err := n1.ProcessReady(); !errors.Is(err, errPowerCut) {
		t.Fatalf("n1's round: %v, want the power cut", err)
	}
	if !n2Got {
		t.Fatal("n2 never logged x: the append did not leave before n1's sync")
	}
	if commit > ia {
		t.Fatalf("n1 committed up to %d with x (index %d) synced on n2 alone: it counted its own unsynced copy", commit, ia+1)
	}
	select {
	case <-px.Done():
		if i, err := px.Result(); err == nil {
			c.record(1, 1, i, "x")
			t.Errorf("x acknowledged at %d without a quorum of synced copies", i)
		}
	default:
		t.Error("x still waiting on a stopped host")
	}
	c.kill(1) // the power cut: n1's unsynced x is torn or gone
	c.kill(2) // and the only disk that has x dies
	c.restart(1)
	c.net.Heal()
	for i := 0; ; i++ {
		if lead, _ := c.leader(1); lead != 0 {
			break
		}
		if i == 300 {
			t.Fatal("no leader of n1 and n3 in 300 ticks")
		}
		c.tick()
	}
	lead, _ := c.leader(1)
	pb, err := c.nodes[lead].host.ProposeAsync(1, []byte("b"))
	if err != nil || !c.await(pb, 50) {
		t.Fatalf("propose b on n%d: %v", lead, err)
	}
	if ib, err := pb.Result(); err == nil {
		c.record(1, lead, ib, "b")
	}
	c.restart(2)
	for range 30 {
		c.tick()
	}
	if err := c.checkSafety(true); err != nil {
		t.Fatal(err)
	}
}
