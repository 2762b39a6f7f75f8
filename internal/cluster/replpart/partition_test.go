package replpart

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// checkOffsets: a log's batches sit at contiguous offsets from 0, in order, with leader
// epochs that never go back.
func checkOffsets(t *testing.T, recs []rec) {
	t.Helper()
	var next int64
	var term uint64
	for i, r := range recs {
		if r.Base != next || r.Term < term {
			t.Fatalf("record %d: %+v after offset %d term %d", i, r, next, term)
		}
		next, term = r.Base+records([]byte(r.Batch)), r.Term
	}
}

// TestAppendOffsetsInOrder: appends on the leader answer with the offsets the log
// assigned, in order and contiguous; every follower's log equals the leader's.
func TestAppendOffsetsInOrder(t *testing.T) {
	c := newCluster(t, 1, 3)
	var next int64
	for i := range 40 {
		var bs []string
		for j := range 1 + i%3 {
			bs = append(bs, fmt.Sprintf("e%d-b%d-%s", i, j, "xyz"[:j]))
		}
		rs := c.mustAppend(bs...)
		if len(rs) != len(bs) {
			t.Fatalf("append %d: %d results for %d batches", i, len(rs), len(bs))
		}
		for j, r := range rs {
			if r.Err != nil || r.Duplicate || r.Base != next {
				t.Fatalf("append %d batch %d: %+v, want base %d", i, j, r, next)
			}
			next += records([]byte(bs[j]))
		}
	}
	recs := c.converge()
	checkOffsets(t, recs)
	if n := len(recs); n != 79 { // 40 appends of 1, 2, 3, 1, … batches: 13·6+1
		t.Fatalf("%d batches stored, want 79", n)
	}
}

// TestFollowerNotLeader: Append on a follower is refused with the leader's ID (nothing
// stored), and Leader agrees on every node with the leader's own term.
func TestFollowerNotLeader(t *testing.T) {
	c := newCluster(t, 2, 3)
	l := c.elect()
	c.mustAppend("x")
	_, lterm := c.nodes[l].part.Leader()
	for _, nd := range c.up() {
		if id, term := nd.part.Leader(); id != l || term != lterm {
			t.Fatalf("n%d: Leader() = n%d term %d, want n%d term %d", nd.id, id, term, l, lterm)
		}
		if nd.id == l {
			continue
		}
		_, err := nd.part.Append(context.Background(), [][]byte{[]byte("y")})
		var nl *NotLeaderError
		if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) || nl.Leader != l {
			t.Fatalf("n%d: append on a follower: %v, want NotLeaderError naming n%d", nd.id, err, l)
		}
	}
	if recs := c.converge(); len(recs) != 1 {
		t.Fatalf("log holds %+v, want only x", recs)
	}
}

// TestRefusalAndDuplicateReachProposer: a batch the log refuses comes back to the proposer
// as BatchResult.Err (the entry's other batches are stored), a duplicate as Duplicate at
// the offset it was stored; every replica decided the same.
func TestRefusalAndDuplicateReachProposer(t *testing.T) {
	c := newCluster(t, 3, 3)
	first := c.mustAppend("p1:a", "bad-seq", "p2:b")
	if first[0].Err != nil || first[2].Err != nil || !errors.Is(first[1].Err, errRefused) {
		t.Fatalf("results %+v: want batch 1 refused, 0 and 2 stored", first)
	}
	again := c.mustAppend("p2:b-retry", "p3:c")
	if !again[0].Duplicate || again[0].Base != first[2].Base || again[1].Duplicate {
		t.Fatalf("retry results %+v: want batch 0 a duplicate at %d", again, first[2].Base)
	}
	recs := c.converge()
	if len(recs) != 3 {
		t.Fatalf("log %+v: want p1, p2, p3", recs)
	}
	checkOffsets(t, recs)
}

// TestAppendBlocksUntilApplied: the public Append returns once its entry is applied here;
// with its context already over it answers ErrOutcomeUnknown — and the entry may well be
// stored all the same.
func TestAppendBlocksUntilApplied(t *testing.T) {
	c := newCluster(t, 4, 3)
	l := c.elect()
	type answer struct {
		rs  []BatchResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		rs, err := c.nodes[l].part.Append(context.Background(), [][]byte{[]byte("one")})
		done <- answer{rs, err}
	}()
	var a answer
	for i := 0; ; i++ {
		select {
		case a = <-done:
		default:
			if i == 500 {
				t.Fatal("Append not answered in 500 ticks")
			}
			// Ticks are logical time and cost nothing: on a loaded machine 500 of them
			// can pass before the goroutine has even proposed. A millisecond each lets it.
			time.Sleep(time.Millisecond)
			c.tick()
			continue
		}
		break
	}
	if a.err != nil || len(a.rs) != 1 || a.rs[0].Base != 0 {
		t.Fatalf("Append: %+v, %v", a.rs, a.err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.nodes[l].part.Append(ctx, [][]byte{[]byte("two")}); !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with its context over: %v, want ErrOutcomeUnknown", err)
	}
	for range 5 {
		c.tick()
	}
	if recs := c.converge(); len(recs) != 2 || recs[1].Batch != "two" {
		t.Fatalf("log %+v: the abandoned append is committed all the same", recs)
	}
	for _, bad := range [][][]byte{nil, {[]byte("a"), {}}} {
		if _, err := c.nodes[l].part.Append(context.Background(), bad); !errors.Is(err, ErrBadAppend) {
			t.Fatalf("Append(%q): %v, want ErrBadAppend", bad, err)
		}
	}
}

// TestLeaderRestartConverges: the leader dies with records applied past its log's last
// checkpoint; a new leader takes appends; the old one restarts on its kept Raft storage
// with its log crashed back to the checkpoint, restores it, re-applies the committed
// entries after it, and ends with the same records at the same offsets and epochs.
func TestLeaderRestartConverges(t *testing.T) {
	c := newCluster(t, 5, 3)
	for i := range 30 {
		c.mustAppend(fmt.Sprintf("old-%d", i))
	}
	c.converge()
	old := c.leader()
	before := len(c.nodes[old].log.snapshot())
	c.kill(old)
	after := len(c.nodes[old].log.snapshot())
	if after == 0 || after >= before {
		t.Fatalf("the crash kept %d of %d batches: the test needs a checkpoint strictly inside the log", after, before)
	}
	nl := c.elect(old)
	for i := range 25 {
		if _, err := c.appendAt(nl, fmt.Sprintf("new-%d", i)); err != nil {
			t.Fatalf("append %d on n%d: %v", i, nl, err)
		}
	}
	restores := c.nodes[old].log.restores
	c.start(old)
	if c.nodes[old].log.restores == restores {
		t.Fatal("the restarted node did not restore a checkpoint")
	}
	recs := c.converge()
	if len(recs) != 55 {
		t.Fatalf("%d batches, want 55", len(recs))
	}
	checkOffsets(t, recs)
	if recs[54].Term <= recs[0].Term {
		t.Fatalf("the new leader's batches carry epoch %d, the old one's %d", recs[54].Term, recs[0].Term)
	}
}

// TestFollowerCatchesUpFromLog: a follower cut off while the leader applies 15 entries (a
// snapshot every 20, the Raft log compacted to the snapshot before the last) catches up
// from the Raft log, not a snapshot: the log keeps at least one snapshot interval behind
// the last snapshot, so a follower a little behind costs no pull.
func TestFollowerCatchesUpFromLog(t *testing.T) {
	c := newCluster(t, 6, 3)
	for i := range 50 { // two snapshots: the log is compacted
		c.mustAppend(fmt.Sprintf("a%d", i))
	}
	l := c.elect()
	lag := c.others(l)[0]
	c.net.Partition(c.others(lag), []multiraft.NodeID{lag})
	for i := range 15 {
		if _, err := c.appendAt(l, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	c.net.Heal()
	recs := c.converge()
	if len(recs) != 65 {
		t.Fatalf("%d batches, want 65", len(recs))
	}
	if sent := c.sentSnapshots(); sent != 0 {
		t.Fatalf("%d snapshots sent to a follower 15 entries behind", sent)
	}
	if c.nodes[lag].log.behind != 0 {
		t.Fatal("the follower pulled")
	}
}

// TestCheckpointNewerThanSnapshot: the leader dies right after the apply that took its
// second snapshot, before anything synced that snapshot: its engine comes back with the
// first one, whose checkpoint is older than what its local log made durable. Restore cuts
// the log back to that older checkpoint and the re-applied entries land at the same offsets.
func TestCheckpointNewerThanSnapshot(t *testing.T) {
	c := newCluster(t, 7, 3)
	old := c.elect()
	for i := 0; c.nodes[old].log.checkpoints < 2; i++ {
		if i == 100 {
			t.Fatal("no second checkpoint in 100 appends")
		}
		if _, err := c.appendAt(old, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.kill(old)
	nl := c.elect(old)
	for i := range 5 {
		if _, err := c.appendAt(nl, fmt.Sprintf("after-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.start(old)
	if c.nodes[old].log.cuts == 0 {
		t.Fatal("the restart cut nothing: the snapshot was synced before the kill, so the test did not test it")
	}
	checkOffsets(t, c.converge())
}
