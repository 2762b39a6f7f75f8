package multiraft_test

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3/raftpb"
)

// TestMemEngineCrash: a crash keeps exactly what the last Sync covered, for every group;
// a failed Sync covers nothing.
func TestMemEngineCrash(t *testing.T) {
	e := multiraft.NewMemEngine()
	a, _ := e.Group(1)
	b, _ := e.Group(2)
	ents := func(from, to, term uint64) []raftpb.Entry {
		var out []raftpb.Entry
		for i := from; i <= to; i++ {
			out = append(out, raftpb.Entry{Index: i, Term: term})
		}
		return out
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Append(ents(1, 3, 1)))
	must(b.Append(ents(1, 2, 1)))
	must(a.SetHardState(raftpb.HardState{Term: 1, Vote: 1, Commit: 2}))
	must(e.Sync([]multiraft.Storage{a, b}))
	must(a.Append(ents(3, 5, 2))) // overwrites index 3 with term 2
	must(b.SetHardState(raftpb.HardState{Term: 3, Vote: 2}))
	e.FailNextSync()
	if err := e.Sync([]multiraft.Storage{a, b}); !errors.Is(err, multiraft.ErrInjectedSync) {
		t.Fatalf("armed Sync: %v", err)
	}
	must(e.Crash())
	a, _ = e.Group(1)
	b, _ = e.Group(2)
	last, _ := a.LastIndex()
	t3, _ := a.Term(3)
	hs, _, _ := a.InitialState()
	if last != 3 || t3 != 1 || hs.Commit != 2 || hs.Vote != 1 {
		t.Fatalf("group 1 after crash: last %d, term(3) %d, hard state %+v; want 3, 1, commit 2 vote 1", last, t3, hs)
	}
	if hs, _, _ := b.InitialState(); hs.Term != 0 {
		t.Fatalf("group 2 kept an unsynced hard state: %+v", hs)
	}
	if e.Syncs() != 1 {
		t.Fatalf("Syncs %d, want 1 (the failed one does not count)", e.Syncs())
	}
}

// TestMemEngineSyncsOnlyTheGivenGroups: Sync makes the groups it is given durable, and
// only those.
func TestMemEngineSyncsOnlyTheGivenGroups(t *testing.T) {
	e := multiraft.NewMemEngine()
	a, _ := e.Group(1)
	b, _ := e.Group(2)
	if err := a.SetHardState(raftpb.HardState{Term: 4}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetHardState(raftpb.HardState{Term: 5}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync([]multiraft.Storage{b}); err != nil {
		t.Fatal(err)
	}
	if err := e.Crash(); err != nil {
		t.Fatal(err)
	}
	a, _ = e.Group(1)
	b, _ = e.Group(2)
	ha, _, _ := a.InitialState()
	hb, _, _ := b.InitialState()
	if ha.Term != 0 || hb.Term != 5 {
		t.Fatalf("after syncing group 2 alone and crashing: terms %d and %d, want 0 and 5", ha.Term, hb.Term)
	}
}

// TestMemEngineCrashKeepsLogBelowSnapshot: a snapshot taken without a compaction leaves
// the entries below it in the log across a crash (raftstore keeps them too); only Compact
// discards them.
func TestMemEngineCrashKeepsLogBelowSnapshot(t *testing.T) {
	e := multiraft.NewMemEngine()
	g, _ := e.Group(1)
	cs := raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	boot := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1, Term: 1, ConfState: cs}}
	var ents []raftpb.Entry
	for i := uint64(2); i <= 10; i++ {
		ents = append(ents, raftpb.Entry{Index: i, Term: 2})
	}
	for _, err := range []error{g.ApplySnapshot(boot), g.Append(ents), g.SetHardState(raftpb.HardState{Term: 2, Commit: 10})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.CreateSnapshot(7, &cs, []byte("at 7")); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync([]multiraft.Storage{g}); err != nil {
		t.Fatal(err)
	}
	if err := e.Crash(); err != nil {
		t.Fatal(err)
	}
	g, _ = e.Group(1)
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	snap, _ := g.Snapshot()
	_, gotCS, _ := g.InitialState()
	if first != 2 || last != 10 || snap.Metadata.Index != 7 || string(snap.Data) != "at 7" || len(gotCS.Voters) != 3 {
		t.Fatalf("after crash: log %d..%d, snapshot at %d %q, conf %+v; want 2..10, at 7 \"at 7\", 3 voters",
			first, last, snap.Metadata.Index, snap.Data, gotCS)
	}
	if err := g.Compact(7); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync([]multiraft.Storage{g}); err != nil {
		t.Fatal(err)
	}
	if err := e.Crash(); err != nil {
		t.Fatal(err)
	}
	g, _ = e.Group(1)
	if first, _ := g.FirstIndex(); first != 8 {
		t.Fatalf("after Compact(7) and a crash: first index %d, want 8", first)
	}
}
