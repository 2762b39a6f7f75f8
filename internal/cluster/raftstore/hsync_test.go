package raftstore

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestCommitOnlyHardStateIsNotSynced: Sync fdatasyncs the HardState log only when a
// HardState changed a term or vote. A round that only moves commit indexes costs its log
// fdatasyncs alone, and a power cut after it may take the commit back (never below what a
// term or vote change last synced, nor past the log), but never the term or the vote.
func TestCommitOnlyHardStateIsNotSynced(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	var walSyncs atomic.Int64
	efs.Inject(vfs.Fault{Match: func(op vfs.Op, path string) bool {
		if op == vfs.OpSync && filepath.Base(path) == walFile {
			walSyncs.Add(1)
		}
		return false
	}})
	s := mustOpen(t, testOptions(efs))
	g := mustGroup(t, s, 1)
	steps := []struct {
		hs       pb.HardState
		walSyncs int64 // of this step's Sync
	}{
		{pb.HardState{Term: 2, Vote: 1, Commit: 0}, 1}, // term and vote: synced
		{pb.HardState{Term: 2, Vote: 1, Commit: 3}, 0}, // commit only: written, not synced
		{pb.HardState{Term: 2, Vote: 1, Commit: 6}, 0},
		{pb.HardState{Term: 3, Vote: 0, Commit: 7}, 1}, // a new term: synced, the commit with it
		{pb.HardState{Term: 3, Vote: 0, Commit: 9}, 0},
	}
	for k, st := range steps {
		must(t, g.Append(ents(uint64(2*k+1), uint64(2*k+2), st.hs.Term)))
		must(t, g.SetHardState(st.hs))
		before := walSyncs.Load()
		must(t, g.Sync())
		if got := walSyncs.Load() - before; got != st.walSyncs {
			t.Fatalf("step %d (%+v): %d fdatasyncs of %s, want %d", k, st.hs, got, walFile, st.walSyncs)
		}
	}
	// Commit-only rounds for ever: the file is still rewritten at its limit.
	defer func(n int64) { walMinLimit = n }(walMinLimit)
	walMinLimit = 400
	s.wal.mu.Lock()
	s.wal.limit = walMinLimit
	s.wal.mu.Unlock()
	for i := range uint64(100) {
		must(t, g.SetHardState(pb.HardState{Term: 3, Commit: 9 + i%2}))
		must(t, g.Sync())
	}
	if fi, err := mem.Stat(filepath.Join("raft", walFile)); err != nil || fi.Size() > 2*walMinLimit {
		t.Fatalf("%s after 100 commit-only rounds: %v, %v; want it rewritten at %d bytes", walFile, fi.Size(), err, walMinLimit)
	}
	mem.Crash() // the last commit-only record is unsynced
	s = mustOpen(t, testOptions(mem))
	defer s.Close()
	g = mustGroup(t, s, 1)
	hs, _, _ := g.InitialState()
	last, _ := g.LastIndex()
	if hs.Term != 3 || hs.Vote != 0 || hs.Commit < 7 || hs.Commit > last {
		t.Fatalf("after the crash: hard state %+v (last index %d), want term 3, vote 0, commit in [7, %d]", hs, last, last)
	}
}
