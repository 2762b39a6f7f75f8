package raftstore

import (
	"io"
	"log"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// rawNode starts a raft core on g as a host would after a restart.
func rawNode(t *testing.T, g *Group) *raft.RawNode {
	t.Helper()
	snap, err := g.Snapshot()
	must(t, err)
	rn, err := raft.NewRawNode(&raft.Config{
		ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: g, Applied: snap.Metadata.Index,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16,
		Logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)},
	})
	must(t, err)
	return rn
}

// persist does what a host's Ready loop does before it sends messages:
// snapshot, entries and hard state, then one Sync.
func persist(t *testing.T, g *Group, rd raft.Ready) {
	t.Helper()
	if !raft.IsEmptySnap(rd.Snapshot) {
		must(t, g.ApplySnapshot(rd.Snapshot))
	}
	must(t, g.Append(rd.Entries))
	if !raft.IsEmptyHardState(rd.HardState) {
		must(t, g.SetHardState(rd.HardState))
	}
	must(t, g.Sync())
}

// voteAnswer steps a vote request from candidate in term and returns
// whether the node granted it, persisting the Ready first.
func voteAnswer(t *testing.T, g *Group, rn *raft.RawNode, candidate, term uint64) bool {
	t.Helper()
	must(t, rn.Step(pb.Message{Type: pb.MsgVote, From: candidate, To: 1, Term: term, LogTerm: 1, Index: 1}))
	rd := rn.Ready()
	persist(t, g, rd)
	rn.Advance(rd)
	for _, m := range rd.Messages {
		if m.Type == pb.MsgVoteResp && m.To == candidate {
			return !m.Reject
		}
	}
	t.Fatalf("no vote response to %d in %+v", candidate, rd.Messages)
	return false
}

// TestVoteSurvivesCrash: a node that granted its vote in term 5 and then
// lost power must, after restart, refuse a second candidate in term 5. A
// forgotten vote would let two leaders be elected in one term.
func TestVoteSurvivesCrash(t *testing.T) {
	mem := vfs.NewMem()
	s := mustOpen(t, testOptions(mem))
	g := mustGroup(t, s, 1)
	must(t, g.ApplySnapshot(pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 1, Term: 1,
		ConfState: pb.ConfState{Voters: []uint64{1, 2, 3}}}}))
	must(t, g.Sync())
	if !voteAnswer(t, g, rawNode(t, g), 2, 5) {
		t.Fatal("the first candidate of term 5 was refused")
	}
	mem.Crash() // power cut: the process and every unsynced byte are gone

	s = mustOpen(t, testOptions(mem))
	defer s.Close()
	g = mustGroup(t, s, 1)
	if hs, _, _ := g.InitialState(); hs.Term != 5 || hs.Vote != 2 {
		t.Fatalf("after the crash: hard state %+v, want term 5 vote 2", hs)
	}
	rn := rawNode(t, g)
	if voteAnswer(t, g, rn, 3, 5) {
		t.Fatal("the node voted twice in term 5")
	}
	if !voteAnswer(t, g, rn, 3, 6) {
		t.Fatal("a candidate of term 6 was refused")
	}
}

// TestRestartAtSnapshotAboveDurableCommit: the host snapshots its state
// machine at an index whose commit was not yet durable (the HardState that
// moved it waits for the next Sync) and the power goes. A restarted raft
// core with Applied at the snapshot must start, and it panics when the
// commit it reads is below Applied: the snapshot's entries are committed.
func TestRestartAtSnapshotAboveDurableCommit(t *testing.T) {
	mem := vfs.NewMem()
	s := mustOpen(t, testOptions(mem))
	g := mustGroup(t, s, 1)
	must(t, g.Append(ents(1, 5, 1)))
	must(t, g.SetHardState(pb.HardState{Term: 1, Commit: 2}))
	must(t, g.Sync())
	must(t, g.SetHardState(pb.HardState{Term: 1, Commit: 5})) // staged, not synced
	_, err := g.CreateSnapshot(5, &pb.ConfState{Voters: []uint64{1}}, []byte("applied 1-5"))
	must(t, err)
	mem.Crash()

	s = mustOpen(t, testOptions(mem))
	defer s.Close()
	g = mustGroup(t, s, 1)
	if hs, _, _ := g.InitialState(); hs.Commit < 5 {
		t.Fatalf("commit %d below the snapshot at 5", hs.Commit)
	}
	rawNode(t, g) // Applied = 5
}
