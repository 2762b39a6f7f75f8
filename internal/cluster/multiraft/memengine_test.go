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
