package broker

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/group"
)

// TestClusterMetadataLogCompactedWithGroups (feature level 3, meta/groupstate.go): three
// brokers in one process with metadata snapshots every 25 entries. A follower is killed;
// meanwhile a group is deleted and another's offsets move on, over enough commits that the
// leader compacts the metadata log past the follower's position (it was never compacted
// once offsets flowed). Restarted, the follower is sent a snapshot, and must hold the
// latest offsets and not the deleted group: in its coordinator, after a power cut and a
// restart from its own disk, and once it is the controller serving the groups (rebuilt
// from its journal, whose forget mark keeps the deleted group out). A group committed
// once, in an entry compacted away before the restart, reaches it only by the snapshot
// (which the controller encodes off its Ready loop, meta/capture.go).
func TestClusterMetadataLogCompactedWithGroups(t *testing.T) {
	c, _, _ := newGroupCluster(t)
	var acked int64
	commit := func(groupID string, off int64) {
		t.Helper()
		c.commitOnCoordinator(groupID, group.OffsetCommit{Topic: "t", Partition: 0, Offset: off, LeaderEpoch: -1})
		if groupID == "g" {
			acked = off
		}
	}
	commit("g", 1)
	commit("gone", 7)
	ctlID, ctl := c.coordinator()
	var lagging multiraft.NodeID
	for _, id := range c.ids {
		if id != ctlID {
			lagging = id
			break
		}
	}
	c.eventually(t, "the lagging node to hold both groups", func() error {
		_, ok := c.nodes[lagging].b.FetchOffset("gone", "t", 0)
		return notYet(ok)
	})
	c.crash(lagging, false)
	behind := firstIndex(t, c, ctlID)

	if err := ctl.DeleteGroup("gone"); err != nil {
		t.Fatalf("deleting a group: %v", err)
	}
	commit("once", 3)    // committed once, in an entry compacted away: only snapshots carry it
	for i := range 120 { // several snapshots, each compacting the log behind it
		commit("g", int64(10+i))
	}
	if first := firstIndex(t, c, ctlID); first <= behind+25 {
		t.Fatalf("the metadata log on n%d starts at %d, %d before the deletion: never compacted past it", ctlID, first, behind)
	}
	taken := func() uint64 { return c.nodes[lagging].host.Stats().SnapsTaken }
	c.start(lagging)
	c.eventually(t, "a snapshot restored on the lagging node", func() error { return notYet(taken() > 0) })

	check := func(when string) {
		t.Helper()
		b := c.nodes[lagging].b
		c.eventually(t, when+": the lagging node at the acknowledged offset", func() error {
			got, ok := b.FetchOffset("g", "t", 0)
			return notYet(ok && got.Offset == acked)
		})
		if _, ok := b.FetchOffset("gone", "t", 0); ok {
			t.Fatalf("%s: the deleted group's offset is back on n%d", when, lagging)
		}
		if got, ok := b.FetchOffset("once", "t", 0); !ok || got.Offset != 3 {
			t.Fatalf("%s: n%d holds group once at %d (%v), want 3: the snapshot lacked it", when, lagging, got.Offset, ok)
		}
		coord, journaled := b.streams.groups.cl.groupsKnown()
		for _, l := range [][]group.GroupSummary{coord, journaled} {
			if slices.ContainsFunc(l, func(s group.GroupSummary) bool { return s.Group == "gone" }) {
				t.Fatalf("%s: n%d still knows the deleted group: coordinator %v, journal %v", when, lagging, coord, journaled)
			}
		}
	}
	check("after the snapshot")

	// Power cut and restarted from what its disk had synced: the snapshot it restored
	// (durable once restored) is complete, so the groups are forgotten again whatever the
	// journal kept of the forget mark and what followed it.
	c.crash(lagging, true)
	c.start(lagging)
	check("after a restart")

	// The controller now: it serves the groups from what it holds.
	c.eventually(t, "the lagging node to lead the metadata group", func() error {
		if id, _ := c.coordinator(); id == lagging {
			return nil
		}
		lead, _ := c.nodes[lagging].host.Status(meta.Group)
		if ob := c.nodes[lead.Leader]; ob != nil && ob.host != nil {
			_ = ob.host.TransferLeadership(meta.Group, lagging)
		}
		time.Sleep(100 * time.Millisecond)
		return errors.New("another node leads")
	})
	check("as the controller")
	if slices.ContainsFunc(c.nodes[lagging].b.ListGroups(), func(s group.GroupSummary) bool { return s.Group == "gone" }) {
		t.Fatal("the new controller lists the deleted group")
	}
}

// firstIndex is the first entry of the metadata log node id still holds.
func firstIndex(t *testing.T, c *memCluster, id multiraft.NodeID) uint64 {
	t.Helper()
	st, err := c.nodes[id].eng.Group(meta.Group)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	return first
}

// groupsKnown lists the groups of c's coordinator and of its journal's state (tests).
func (c *clusterGroups) groupsKnown() (coord, journaled []group.GroupSummary) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.g.coord.List(), c.journaled.List()
}

// notYet is eventually's error for a condition that does not hold yet.
func notYet(ok bool) error {
	if ok {
		return nil
	}
	return errors.New("not yet")
}
