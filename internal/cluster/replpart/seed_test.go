package replpart

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// others returns the ids of c but those given.
func (c *cluster) others(not ...multiraft.NodeID) []multiraft.NodeID {
	var out []multiraft.NodeID
	for _, id := range c.ids {
		if !slices.Contains(not, id) {
			out = append(out, id)
		}
	}
	return out
}

// cutOff partitions a follower of the leader away while n entries (keys k0…) are appended,
// each a key an idempotent producer could retry; it returns the leader and the follower.
func (c *cluster) cutOff(n int) (leader, lag multiraft.NodeID) {
	c.t.Helper()
	leader = c.elect()
	lag = c.others(leader)[0]
	c.net.Partition(c.others(lag), []multiraft.NodeID{lag})
	for i := range n {
		if _, err := c.appendAt(leader, fmt.Sprintf("k%d:%s", i, "xyz"[:i%3])); err != nil {
			c.t.Fatalf("append %d: %v", i, err)
		}
	}
	return leader, lag
}

// TestFollowerPullsPastCompaction: a follower cut off while the leader applies 100 entries
// (a snapshot every 20, the Raft log compacted behind them) is sent a snapshot, pulls the
// records it names from a peer in chunks of about 40 bytes while preparing it (off the
// Ready loop: the Restore that follows finds nothing missing), and ends with the leader's
// records at the same offsets and epochs. Made leader, it answers a retried key as a
// Duplicate at its first offset: the producer dedup came along with the records.
func TestFollowerPullsPastCompaction(t *testing.T) {
	c := newCluster(t, 6, 3, chunked(40))
	leader, lag := c.cutOff(100)
	if n := c.nodes[leader].log.checkpoints; n < 4 {
		t.Fatalf("the leader checkpointed %d times over 100 entries, want a snapshot every 20", n)
	}
	c.net.Heal()
	recs := c.converge()
	if len(recs) != 100 {
		t.Fatalf("%d batches, want 100", len(recs))
	}
	checkOffsets(t, recs)
	if c.sentSnapshots() == 0 {
		t.Fatal("no snapshot was sent: the Raft log was not compacted past the follower")
	}
	st := c.nodes[lag].sm.PullStats()
	if st.Pulls == 0 || st.Chunks < 3 || c.nodes[lag].log.pulled == 0 {
		t.Fatalf("the follower did not pull in chunks: %+v, %d batches pulled", st, c.nodes[lag].log.pulled)
	}
	if n := c.nodes[lag].log.behind; n != 0 {
		t.Fatalf("Restore found the log behind %d times: the pull was not done in the snapshot's preparation", n)
	}
	if st.At != 0 || st.Target != 0 {
		t.Fatalf("no pull under way, yet the stats say %+v", st)
	}
	if err := c.nodes[c.leader()].host.TransferLeadership(testGroup, lag); err != nil {
		t.Fatal(err)
	}
	for i := 0; c.leader() != lag; i++ {
		if i == 200 {
			t.Fatal("the follower did not take the leadership")
		}
		c.tick()
	}
	rs, err := c.appendAt(lag, "k7:x")
	if err != nil {
		t.Fatal(err)
	}
	if !rs[0].Duplicate || rs[0].Base != recs[7].Base {
		t.Fatalf("retried key on the new leader: %+v, want a duplicate at %d", rs[0], recs[7].Base)
	}
}

// TestPullSourceDiesMidPull: the first peer asked answers two chunks and then fails every
// request (it died, or answers no more); the puller carries on from the other replica
// where it was, and ends identical.
func TestPullSourceDiesMidPull(t *testing.T) {
	c := newCluster(t, 8, 3, chunked(40))
	leader, lag := c.cutOff(100)
	var served atomic.Int32
	var dead atomic.Uint64
	c.net.SetRequestHook(func(from, to multiraft.NodeID, _ multiraft.GroupID, _ []byte) error {
		if dead.Load() == 0 {
			dead.Store(uint64(to))
		}
		if uint64(to) == dead.Load() && served.Add(1) > 2 {
			return errors.New("peer died")
		}
		return nil
	})
	c.net.Heal()
	recs := c.converge()
	if len(recs) != 100 {
		t.Fatalf("%d batches, want 100", len(recs))
	}
	st := c.nodes[lag].sm.PullStats()
	if st.Failures == 0 || dead.Load() == 0 {
		t.Fatalf("no request failed (%+v): the test did not kill a source mid-pull", st)
	}
	_ = leader
}

// TestPullFromAboveRetention: every peer's retention deleted the records below offset 60
// while the follower was cut off at far less; its pull starts at the sources' log start,
// its own log start moves up there (as a Kafka follower's), and from there on it holds the
// leader's records.
func TestPullFromAboveRetention(t *testing.T) {
	c := newCluster(t, 9, 3)
	leader, lag := c.cutOff(100)
	recs := c.nodes[leader].log.snapshot()
	cut := recs[40].Base
	for _, id := range c.others(lag) {
		c.nodes[id].log.deleteBelow(cut)
	}
	c.net.Heal()
	got := c.converge()
	if len(got) != 60 || got[0].Base != cut {
		t.Fatalf("the follower holds %d batches from %+v; want 60 from offset %d", len(got), got[0], cut)
	}
	if s := c.nodes[lag].log.start; s != cut {
		t.Fatalf("the follower's log starts at %d, want %d", s, cut)
	}
}

// TestPullNoSource: no peer answers (every request fails): the snapshot's preparation
// gives up with ErrNoSource after its rounds and the snapshot is dropped, the follower's log
// is not touched; once the peers answer again (here after a restart too) it pulls and
// converges.
func TestPullNoSource(t *testing.T) {
	c := newCluster(t, 10, 3)
	_, lag := c.cutOff(100)
	before := c.nodes[lag].log.snapshot()
	c.net.SetRequestHook(func(_, _ multiraft.NodeID, _ multiraft.GroupID, _ []byte) error {
		return errors.New("nobody home")
	})
	c.net.Heal()
	for range 50 {
		c.tick()
	}
	st := c.nodes[lag].sm.PullStats()
	if st.Pulls == 0 || st.Failures < 6 { // 3 rounds × 2 peers
		t.Fatalf("pull stats %+v: want a pull that failed every round", st)
	}
	if got := c.nodes[lag].log.snapshot(); !slices.Equal(got, before) {
		t.Fatalf("the follower's log changed without a source: %d batches, was %d", len(got), len(before))
	}
	c.net.SetRequestHook(nil)
	c.kill(lag)
	c.start(lag)
	if recs := c.converge(); len(recs) != 100 {
		t.Fatalf("%d batches, want 100", len(recs))
	}
}

// TestCrashDuringPull: on raftstore over a crashable MemFS, the follower's pull stops after
// a few chunks (its sources go away) and it crashes there, losing the unsynced records it
// pulled; it restarts, is sent the snapshot again, pulls again and converges.
func TestCrashDuringPull(t *testing.T) {
	c := newClusterOn(t, 11, 3, newStoreDisk, chunked(40))
	_, lag := c.cutOff(100)
	var served atomic.Int32
	c.net.SetRequestHook(func(_, _ multiraft.NodeID, _ multiraft.GroupID, _ []byte) error {
		if served.Add(1) > 3 {
			return errors.New("gone")
		}
		return nil
	})
	c.net.Heal()
	for i := 0; c.nodes[lag].sm.PullStats().Failures < 6; i++ {
		if i == 100 {
			t.Fatal("the pull never failed")
		}
		c.tick()
	}
	if n := c.nodes[lag].log.pulled; n == 0 {
		t.Fatal("nothing was pulled before the sources went away")
	}
	c.kill(lag)
	c.net.SetRequestHook(nil)
	c.start(lag)
	recs := c.converge()
	if st := c.nodes[lag].sm.PullStats(); st.Pulls == 0 || st.Chunks == 0 {
		t.Fatalf("the restarted follower did not pull: %+v", st)
	}
	if len(recs) != 100 {
		t.Fatalf("%d batches, want 100", len(recs))
	}
	checkOffsets(t, recs)
}

// TestWipedLogPullsAtStart: a follower's local log is lost while its Raft state is kept
// (a removed partition directory). At restart CreateGroup restores its own snapshot, whose
// checkpoint is ahead of the empty log: Restore pulls the records before the group starts.
func TestWipedLogPullsAtStart(t *testing.T) {
	c := newCluster(t, 12, 3, chunked(40))
	leader := c.elect()
	for i := range 60 {
		if _, err := c.appendAt(leader, fmt.Sprintf("k%d:%s", i, "xyz"[:i%3])); err != nil {
			t.Fatal(err)
		}
	}
	recs := c.converge()
	lag := c.others(leader)[0]
	c.kill(lag)
	c.nodes[lag].log = &fakeLog{}
	c.start(lag)
	if n := c.nodes[lag].log.behind; n == 0 {
		t.Fatal("the restart found nothing missing: the test did not wipe a log behind a snapshot")
	}
	if st := c.nodes[lag].sm.PullStats(); st.Pulls != 1 || st.Chunks < 3 {
		t.Fatalf("pull stats %+v, want one pull in chunks", st)
	}
	if got := c.converge(); !slices.Equal(got[:len(recs)], recs) {
		t.Fatalf("after the wipe: %s", diff(got[:len(recs)], recs))
	}
}
