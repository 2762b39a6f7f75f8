package multiraft_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// capturing is a recorder whose snapshots are captured in the Ready loop (the entries so
// far) and encoded once release is closed.
type capturing struct {
	*recorder
	release chan struct{}
	at      []uint64 // the last index of each capture
}

func (c *capturing) CaptureSnapshot() (func() ([]byte, error), error) {
	ents := c.recorder.entries()
	c.at = append(c.at, ents[len(ents)-1].Index)
	return func() ([]byte, error) {
		<-c.release
		return json.Marshal(ents)
	}, nil
}

// TestSnapshotEncodedOffTheReadyLoop: a SnapshotCapturer's snapshot is encoded while the
// group goes on: entries are applied and answered meanwhile, no second snapshot is taken,
// and the stored snapshot is the state at the captured index, stored once the encoding
// ends, with the log compacted behind it. A node crashed and restarted then restores it
// and applies the entries after it again, ending with the same state as the others.
func TestSnapshotEncodedOffTheReadyLoop(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{SnapshotEntries: 10, DisableQuiesce: true})
	release := make(chan struct{})
	sms := map[multiraft.NodeID]*capturing{}
	for _, id := range c.ids {
		nd := c.nodes[id]
		sms[id] = &capturing{recorder: &recorder{}, release: release}
		if err := nd.host.CreateGroup(1, c.ids, sms[id]); err != nil {
			t.Fatal(err)
		}
		nd.sms[1], nd.groups = sms[id].recorder, append(nd.groups, 1)
	}
	_ = c.nodes[1].host.Campaign(1)
	c.settle()
	leader, _ := c.leader(1)
	propose := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			p, err := c.nodes[leader].host.ProposeAsync(1, []byte(fmt.Sprint(i)))
			if err != nil || !c.await(p, 50) {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
	}
	stored := func(id multiraft.NodeID) (uint64, []multiraft.Entry) {
		t.Helper()
		st, err := c.nodes[id].disk.(*memDisk).eng.Group(1)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var ents []multiraft.Entry
		if len(snap.Data) > 0 {
			if err := json.Unmarshal(snap.Data, &ents); err != nil {
				t.Fatal(err)
			}
		}
		return snap.Metadata.Index, ents
	}
	propose(0, 12) // past SnapshotEntries: each node captures, and waits to encode
	for _, id := range c.ids {
		if len(sms[id].at) != 1 {
			t.Fatalf("n%d captured %d snapshots after 12 entries, want 1", id, len(sms[id].at))
		}
	}
	boot, _ := stored(leader)
	propose(12, 25) // the group goes on while the encodings wait; none is captured again
	for _, id := range c.ids {
		if n := len(c.nodes[id].sms[1].entries()); n != 37 {
			t.Fatalf("n%d applied %d entries while its snapshot was encoded, want 37", id, n)
		}
		if len(sms[id].at) != 1 {
			t.Fatalf("n%d captured again while encoding: at %v", id, sms[id].at)
		}
		if index, _ := stored(id); index != boot {
			t.Fatalf("n%d stored a snapshot at %d before its encoding ended", id, index)
		}
	}
	close(release)
	for range 5 {
		c.waitEncodings()
		c.tick()
	}
	for _, id := range c.ids {
		index, ents := stored(id)
		if index != sms[id].at[0] || len(ents) == 0 || ents[len(ents)-1].Index != index {
			t.Fatalf("n%d stored a snapshot at %d holding %d entries, want the capture at %d", id, index, len(ents), sms[id].at[0])
		}
		st, _ := c.nodes[id].disk.(*memDisk).eng.Group(1)
		if first, _ := st.FirstIndex(); first <= boot+1 {
			t.Fatalf("n%d: log not compacted behind the snapshot (first index %d)", id, first)
		}
	}
	// The next interval captures again; a crash then restarts from the stored snapshot.
	propose(37, 10)
	c.waitEncodings()
	c.tick()
	victim := othersThan(c.ids, leader)[0]
	c.kill(victim)
	c.restart(victim)
	for range 50 {
		c.tick()
	}
	want := c.nodes[leader].sms[1].entries()
	var got []multiraft.Entry
	for range 100 {
		if got = c.nodes[victim].sms[1].entries(); len(got) == len(want) {
			break
		}
		c.tick()
	}
	if !slices.EqualFunc(got, want, func(a, b multiraft.Entry) bool { return a.Index == b.Index && string(a.Data) == string(b.Data) }) {
		t.Fatalf("n%d after a restart holds %d entries, the leader %d", victim, len(got), len(want))
	}
}

// waitEncodings waits until no up node encodes a snapshot.
func (c *cluster) waitEncodings() {
	for _, nd := range c.up() {
		for i := 0; nd.host.BackgroundWork() > 0; i++ {
			if i == 20000 {
				c.t.Fatalf("n%d: an encoding did not end in 2 s", nd.id)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// TestSnapshotStoresSpreadOverRounds: encodings that end together are stored a store
// budget's worth per round (at least one), the rest in the rounds after, so a burst of
// them does not hold the node's other groups for the whole burst; with the budget
// (10 ms, and a store on the in-memory engine costs microseconds) one round stores all.
func TestSnapshotStoresSpreadOverRounds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		budget     time.Duration
		wantRounds int
	}{
		{"one per round with no budget", 0, 8},
		{"all in one round within the budget", 10 * time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1, 1, multiraft.Config{SnapshotEntries: 3, DisableQuiesce: true})
			nd := c.nodes[1]
			release := make(chan struct{})
			const groups = 8
			for g := multiraft.GroupID(1); g <= groups; g++ {
				sm := &capturing{recorder: &recorder{}, release: release}
				if err := nd.host.CreateGroup(g, c.ids, sm); err != nil {
					t.Fatal(err)
				}
				nd.sms[g], nd.groups = sm.recorder, append(nd.groups, g)
				_ = nd.host.Campaign(g)
			}
			c.settle()
			for g := multiraft.GroupID(1); g <= groups; g++ {
				for i := range 4 { // past SnapshotEntries: every group captures once
					p, err := nd.host.ProposeAsync(g, []byte(fmt.Sprint(i)))
					if err != nil || !c.await(p, 50) {
						t.Fatalf("group %d, entry %d: %v", g, i, err)
					}
				}
			}
			nd.host.SetSnapshotStoreBudget(tc.budget)
			before := nd.host.Stats().SnapsCreated
			close(release)
			c.waitEncodings() // every encoding ended: all wait for the next round together
			rounds := 0
			for nd.host.Stats().SnapsCreated-before < groups {
				if rounds++; rounds > groups {
					t.Fatalf("%d of %d snapshots stored after %d rounds", nd.host.Stats().SnapsCreated-before, groups, rounds-1)
				}
				if _, err := nd.host.ProcessReady(); err != nil {
					t.Fatal(err)
				}
				if tc.budget == 0 && nd.host.Stats().SnapsCreated-before != uint64(rounds) {
					t.Fatalf("round %d: %d snapshots stored so far, want one per round", rounds, nd.host.Stats().SnapsCreated-before)
				}
			}
			if rounds != tc.wantRounds {
				t.Fatalf("stored in %d rounds, want %d", rounds, tc.wantRounds)
			}
		})
	}
}

// TestNoEncodingStartsOnceClosed: a round that applies past the snapshot interval after
// Close (a Run not yet stopped, as a crashed node's is) captures nothing and starts no
// encoding: one started then raced Close's wait for the encodings and outlived it
// (the race detector caught it in broker.TestClusterPowerCuts).
func TestNoEncodingStartsOnceClosed(t *testing.T) {
	// The bootstrap snapshot is at index 1: the snapshot is due once entry 21 applies.
	c := newCluster(t, 1, 1, multiraft.Config{SnapshotEntries: 20, DisableQuiesce: true})
	nd := c.nodes[1]
	release := make(chan struct{})
	defer close(release)
	sm := &capturing{recorder: &recorder{}, release: release}
	if err := nd.host.CreateGroup(1, c.ids, sm); err != nil {
		t.Fatal(err)
	}
	nd.sms[1], nd.groups = sm.recorder, append(nd.groups, 1)
	_ = nd.host.Campaign(1)
	c.settle()
	for i := 0; len(sm.entries()) == 0 || sm.entries()[len(sm.entries())-1].Index < 20; i++ {
		p, err := nd.host.ProposeAsync(1, []byte(fmt.Sprint(i)))
		if err != nil || !c.await(p, 50) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if len(sm.at) != 0 {
		t.Fatalf("captured at %v before the interval", sm.at)
	}
	if _, err := nd.host.ProposeAsync(1, []byte("past the interval")); err != nil {
		t.Fatal(err)
	}
	nd.host.Close()
	for range 5 {
		if _, err := nd.host.ProcessReady(); err != nil {
			break
		}
	}
	if n := nd.host.BackgroundWork(); n != 0 || len(sm.at) != 0 {
		t.Fatalf("after Close: %d encodings under way, captures at %v", n, sm.at)
	}
}
