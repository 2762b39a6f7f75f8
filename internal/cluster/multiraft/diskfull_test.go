package multiraft_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// fillDisk makes every write and create on d fail with ENOSPC while *full is true, as a
// disk with no room left does; with walOnly, only the HardState log's (a round that
// appends nothing still writes its commit index there).
func fillDisk(d *storeDisk, full *atomic.Bool, walOnly bool) {
	d.efs.Inject(vfs.Fault{Err: syscall.ENOSPC, Match: func(op vfs.Op, path string) bool {
		return full.Load() && (op == vfs.OpWrite || op == vfs.OpCreate) &&
			(!walOnly || strings.HasSuffix(path, "hardstate.wal"))
	}})
}

// TestFullDiskStallsTheNode: a node whose disk has no room for a round's appends neither
// stops (as a failed fsync does) nor acknowledges anything: its Ready loop stalls, its
// peers carry on without it (electing another leader when it led), and once there is room
// again the same round is written and the node catches up, with every acknowledged entry
// where it was acknowledged. Both ways a round meets a full disk: its appends, and (a
// round with nothing to append but a commit index) its HardState log's write.
func TestFullDiskStallsTheNode(t *testing.T) {
	t.Run("every write", func(t *testing.T) { fullDiskStallsTheNode(t, false) })
	t.Run("the HardState log", func(t *testing.T) { fullDiskStallsTheNode(t, true) })
}

func fullDiskStallsTheNode(t *testing.T, walOnly bool) {
	var notified atomic.Int32
	disks := map[multiraft.NodeID]*storeDisk{}
	mk := newStoreDisk(1)
	c := newClusterOn(t, 1, 3, multiraft.Config{OnDiskFull: func(err error) {
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("OnDiskFull heard %v, want ENOSPC", err)
		}
		notified.Add(1)
	}}, func(id multiraft.NodeID) disk {
		disks[id] = mk(id).(*storeDisk)
		return disks[id]
	})
	c.createGroup(1, c.ids, c.ids)
	if err := c.nodes[1].host.Campaign(1); err != nil {
		t.Fatal(err)
	}
	c.settle()
	propose := func(on multiraft.NodeID, data string) *multiraft.Proposal {
		t.Helper()
		p, err := c.nodes[on].host.ProposeAsync(1, []byte(data))
		if err != nil {
			t.Fatalf("propose %q on n%d: %v", data, on, err)
		}
		return p
	}
	commit := func(on multiraft.NodeID, data string) {
		t.Helper()
		p := propose(on, data)
		if !c.await(p, 60) {
			t.Fatalf("%q on n%d not committed", data, on)
		}
		i, err := p.Result()
		if err != nil {
			t.Fatalf("%q on n%d: %v", data, on, err)
		}
		c.record(1, on, i, data)
	}
	applied := func(id multiraft.NodeID) int { return len(c.nodes[id].sms[1].entries()) }
	commit(1, "a")

	// A follower fills up: the other two commit without it; it stalls, not stops.
	var full2 atomic.Bool
	fillDisk(disks[2], &full2, walOnly)
	full2.Store(true)
	before := applied(2)
	commit(1, "b")
	commit(1, "c")
	for range 30 {
		c.tick() // the harness fails the test on any ProcessReady error
	}
	h2 := c.nodes[2].host
	if err := h2.DiskFull(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("n2's DiskFull while its disk is full: %v", err)
	}
	if got := applied(2); got != before {
		t.Fatalf("n2 applied %d entries with a full disk, %d before: an entry it could not store", got, before)
	}
	if n := notified.Load(); n != 1 {
		t.Fatalf("OnDiskFull heard %d stalls, want 1 (one stall, retried many times)", n)
	}
	if n := h2.Stats().AppendsDroppedWhileFull; n == 0 {
		t.Fatal("n2 kept the appends it received while stalled")
	}
	full2.Store(false)
	for range 10 {
		c.tick()
	}
	if err := h2.DiskFull(); err != nil {
		t.Fatalf("n2's DiskFull after room came back: %v", err)
	}
	if err := c.checkSafety(true); err != nil {
		t.Fatal(err)
	}

	// The leader fills up: silent, it is replaced, and rejoins once there is room.
	var full1 atomic.Bool
	fillDisk(disks[1], &full1, walOnly)
	full1.Store(true)
	stuck := propose(1, "d")
	var lead multiraft.NodeID
	for range 200 {
		c.tick()
		if lead, _ = c.leader(1); lead != 0 && lead != 1 {
			break
		}
	}
	if lead == 0 || lead == 1 {
		t.Fatalf("no other leader while n1's disk is full (leader n%d)", lead)
	}
	commit(lead, "e")
	full1.Store(false)
	for range 40 {
		c.tick()
	}
	select {
	case <-stuck.Done():
		if i, err := stuck.Result(); err == nil {
			c.record(1, 1, i, "d")
		}
	default:
		t.Fatal("n1's proposal made while its disk was full still waits after it rejoined")
	}
	commit(lead, "f")
	for range 10 {
		c.tick()
	}
	if err := c.checkSafety(true); err != nil {
		t.Fatal(err)
	}
	if n := notified.Load(); n != 2 {
		t.Fatalf("OnDiskFull heard %d stalls, want 2", n)
	}
	for _, id := range c.ids {
		if st := c.nodes[id].host.Stats(); id != 3 && st.DiskFullStalls != 1 {
			t.Errorf("n%d counted %d stalls, want 1", id, st.DiskFullStalls)
		}
	}
}

// crampedRecorder is a recorder on a disk that may be full: then it has room for one more
// entry (room), and reports no room for the next, having applied those before it.
type crampedRecorder struct {
	*recorder
	full *atomic.Bool
	room int
}

func (r *crampedRecorder) Apply(ents []multiraft.Entry) error {
	for k, e := range ents {
		if r.full.Load() {
			if r.room == 0 {
				return fmt.Errorf("test sm: %w", &multiraft.NoRoomError{Index: e.Index, Err: syscall.ENOSPC})
			}
			r.room--
		}
		if err := r.recorder.Apply(ents[k : k+1]); err != nil {
			return err
		}
	}
	return nil
}

// TestFullDiskStallsTheApply: a state machine that finds no room for an entry
// (NoRoomError, after applying those before it) stalls its node's Ready loop instead of
// stopping its group there; once there is room the node applies from that entry on, every
// entry once and in order, as a follower and as the leader (whose entries already synced
// are applied before the round's sync).
func TestFullDiskStallsTheApply(t *testing.T) {
	for _, lead := range []multiraft.NodeID{1, 3} {
		t.Run(fmt.Sprintf("leader n%d", lead), func(t *testing.T) { fullDiskStallsTheApply(t, lead) })
	}
}

func fullDiskStallsTheApply(t *testing.T, lead multiraft.NodeID) {
	c := newCluster(t, 1, 3, multiraft.Config{})
	c.createGroup(1, c.ids[:2], c.ids)
	var full atomic.Bool
	nd := c.nodes[3]
	nd.sms[1] = &recorder{}
	if err := nd.host.CreateGroup(1, c.ids, &crampedRecorder{recorder: nd.sms[1], full: &full, room: 1}); err != nil {
		t.Fatal(err)
	}
	nd.groups = append(nd.groups, 1)
	if err := c.nodes[lead].host.Campaign(1); err != nil {
		t.Fatal(err)
	}
	c.settle()
	proposeAll := func(on multiraft.NodeID, data ...string) {
		t.Helper()
		var ps []*multiraft.Proposal
		for _, d := range data {
			p, err := c.nodes[on].host.ProposeAsync(1, []byte(d))
			if err != nil {
				t.Fatalf("propose %q on n%d: %v", d, on, err)
			}
			ps = append(ps, p)
		}
		for k, p := range ps {
			if !c.await(p, 60) {
				t.Fatalf("%q on n%d not done", data[k], on)
			}
			if i, err := p.Result(); err == nil {
				c.record(1, on, i, data[k])
			}
		}
	}
	proposeAll(lead, "a")
	full.Store(true)
	before := len(nd.sms[1].entries())
	settleStalled := func() {}
	if lead == 3 {
		// Its proposals wait for its apply: stalled, it goes silent, and another node
		// takes over once the election timeout passes.
		var ps []*multiraft.Proposal
		for _, d := range []string{"b1", "b2"} { // room for the first only
			p, err := nd.host.ProposeAsync(1, []byte(d))
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		for range 100 {
			c.tick()
			if l, _ := c.leader(1); l != 0 && l != 3 {
				lead = l
				break
			}
		}
		if lead == 3 {
			t.Fatal("no other leader while n3 cannot apply")
		}
		settleStalled = func() { // resolved by then: applied, or dropped with its leadership
			for k, p := range ps {
				select {
				case <-p.Done():
				default:
					t.Fatalf("n3's proposal %d still waits after it could apply again", k)
				}
				if i, err := p.Result(); err == nil {
					c.record(1, 3, i, []string{"b1", "b2"}[k])
				}
			}
		}
	}
	proposeAll(lead, "c", "d", "e", "f")
	for range 20 {
		c.tick()
	}
	if err := nd.host.DiskFull(); err == nil {
		t.Fatal("n3 cannot apply and its DiskFull is nil")
	}
	if st, err := nd.host.Status(1); err != nil || nd.host.Err() != nil {
		t.Fatalf("n3's group or host stopped on a full disk: %+v %v %v", st, err, nd.host.Err())
	}
	if got := len(nd.sms[1].entries()); got != before+1 {
		t.Fatalf("n3 applied %d entries with its disk full and room for one, %d before", got, before)
	}
	full.Store(false)
	for range 20 {
		c.tick()
	}
	if err := nd.host.DiskFull(); err != nil {
		t.Fatalf("n3's DiskFull once there is room: %v", err)
	}
	proposeAll(lead, "g")
	for range 10 {
		c.tick()
	}
	settleStalled()
	if err := c.checkSafety(true); err != nil {
		t.Fatal(err)
	}
}
