package raftstore

import (
	"errors"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestAppendTruncateReopen: entries of several terms and every type come
// back as they went in (nil and empty data kept apart), a conflicting
// append cuts the suffix, and a clean reopen serves the same log, terms
// and state.
func TestAppendTruncateReopen(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOptions(fs))
	g := mustGroup(t, s, 7)
	in := append(ents(1, 3, 1), pb.Entry{Index: 4, Term: 2, Type: pb.EntryConfChange, Data: []byte("cc")},
		pb.Entry{Index: 5, Term: 2}, pb.Entry{Index: 6, Term: 2, Data: []byte{}},
		pb.Entry{Index: 7, Term: 3, Type: pb.EntryConfChangeV2, Data: []byte("v2")})
	must(t, g.Append(in))
	must(t, g.Append(ents(6, 8, 4))) // cuts 6 and 7
	want := append(append([]pb.Entry{}, in[:5]...), ents(6, 8, 4)...)
	must(t, g.SetHardState(pb.HardState{Term: 4, Vote: 3, Commit: 5}))
	must(t, s.Sync(g))
	check := func(g *Group) {
		t.Helper()
		got, err := g.Entries(1, 9, noLimit)
		must(t, err)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("entries\n got %v\nwant %v", got, want)
		}
		for _, e := range want {
			if tm, err := g.Term(e.Index); err != nil || tm != e.Term {
				t.Fatalf("Term(%d) = %d, %v; want %d", e.Index, tm, err, e.Term)
			}
		}
		if tm, err := g.Term(0); err != nil || tm != 0 {
			t.Fatalf("Term(0) = %d, %v", tm, err)
		}
		if _, err := g.Term(9); err != raft.ErrUnavailable {
			t.Fatalf("Term(9): %v", err)
		}
		hs, _, _ := g.InitialState()
		if hs != (pb.HardState{Term: 4, Vote: 3, Commit: 5}) {
			t.Fatalf("hard state %+v", hs)
		}
	}
	check(g)
	must(t, s.Close())
	s = mustOpen(t, testOptions(fs))
	defer s.Close()
	check(mustGroup(t, s, 7))
}

const noLimit = ^uint64(0)

// TestSnapshotResetsLog: ApplySnapshot past the log discards it; entries
// go on after the snapshot, Term(snapshot) is the snapshot's term, and a
// reopen agrees.
func TestSnapshotResetsLog(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOptions(fs))
	g := mustGroup(t, s, 1)
	must(t, g.Append(ents(1, 5, 1)))
	cs := pb.ConfState{Voters: []uint64{1, 2, 3}}
	must(t, g.ApplySnapshot(pb.Snapshot{Data: []byte("state"), Metadata: pb.SnapshotMetadata{Index: 20, Term: 3, ConfState: cs}}))
	must(t, g.Append(ents(21, 22, 3)))
	must(t, g.SetHardState(pb.HardState{Term: 3, Commit: 21}))
	must(t, g.Sync())
	if err := g.ApplySnapshot(pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 20, Term: 3}}); err != raft.ErrSnapOutOfDate {
		t.Fatalf("old snapshot: %v", err)
	}
	must(t, s.Close())
	s = mustOpen(t, testOptions(fs))
	defer s.Close()
	g = mustGroup(t, s, 1)
	if f, _ := g.FirstIndex(); f != 21 {
		t.Fatalf("first %d", f)
	}
	if tm, _ := g.Term(20); tm != 3 {
		t.Fatalf("Term(20) = %d", tm)
	}
	if _, err := g.Entries(20, 22, noLimit); err != raft.ErrCompacted {
		t.Fatalf("Entries(20): %v", err)
	}
	_, gotCS, _ := g.InitialState()
	if !reflect.DeepEqual(gotCS, cs) {
		t.Fatalf("conf state %+v", gotCS)
	}
	snap, err := g.Snapshot()
	must(t, err)
	if string(snap.Data) != "state" || snap.Metadata.Index != 20 {
		t.Fatalf("snapshot %+v", snap)
	}
}

// TestWritesRefusedAfterFailedSync: an fdatasync error is final
// (fsyncgate): the group refuses writes until it is reopened, and what was
// durable before is still there after.
func TestWritesRefusedAfterFailedSync(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	s := mustOpen(t, testOptions(efs))
	g := mustGroup(t, s, 1)
	must(t, g.Append(ents(1, 2, 1)))
	must(t, g.SetHardState(pb.HardState{Term: 1, Vote: 1, Commit: 2}))
	must(t, g.Sync())
	must(t, g.Append(ents(3, 4, 1)))
	efs.Inject(vfs.Fault{Op: vfs.OpSync, Count: 1})
	if err := s.Sync(g); err == nil {
		t.Fatal("Sync succeeded through a failing fdatasync")
	}
	if err := g.Append(ents(5, 5, 1)); err == nil || g.Err() == nil {
		t.Fatalf("append after a failed sync: %v (Err %v)", err, g.Err())
	}
	g.Close() // reports the failed log again
	mem.Crash()
	g = mustGroup(t, s, 1)
	defer s.Close()
	got, err := g.Entries(1, 3, noLimit)
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("durable entries lost: %v", got)
	}
	if hs, _, _ := g.InitialState(); hs.Vote != 1 || hs.Commit != 2 {
		t.Fatalf("hard state %+v", hs)
	}
}

// TestENOSPCAppendLeavesLogUsable: a write that finds the disk full fails
// that Append only; the log is cut back, and once space returns the same
// entries append and sync.
func TestENOSPCAppendLeavesLogUsable(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	s := mustOpen(t, testOptions(efs))
	defer s.Close()
	g := mustGroup(t, s, 1)
	must(t, g.Append(ents(1, 2, 1)))
	must(t, g.Sync())
	efs.SetSpace(10)
	if err := g.Append(ents(3, 5, 1)); err == nil {
		t.Fatal("append on a full disk succeeded")
	}
	if l, _ := g.LastIndex(); l != 2 || g.Err() != nil {
		t.Fatalf("after ENOSPC: last %d, err %v", l, g.Err())
	}
	efs.SetSpace(vfs.Unlimited)
	must(t, g.Append(ents(3, 5, 1)))
	must(t, g.Sync())
	if got, err := g.Entries(1, 6, noLimit); err != nil || len(got) != 5 {
		t.Fatalf("entries %v, %v", got, err)
	}
}

// TestCompactDeletesSegments: Compact moves FirstIndex, keeps Term of the
// compaction point, refuses to pass the snapshot, and deletes whole
// segments below it (the log is small-segmented here).
func TestCompactDeletesSegments(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOptions(fs))
	g := mustGroup(t, s, 1)
	for i := uint64(1); i <= 100; i += 10 {
		must(t, g.Append(ents(i, i+9, 1+i/50)))
	}
	must(t, g.SetHardState(pb.HardState{Term: 2, Commit: 90}))
	must(t, g.Sync())
	if err := g.Compact(50); err == nil {
		t.Fatal("compact past the (missing) snapshot succeeded")
	}
	_, err := g.CreateSnapshot(80, &pb.ConfState{Voters: []uint64{1}}, []byte("sm"))
	must(t, err)
	segsBefore, _ := g.log.SegmentSizes()
	must(t, g.Compact(70))
	segsAfter, _ := g.log.SegmentSizes()
	if len(segsAfter) >= len(segsBefore) {
		t.Fatalf("compaction deleted no segment: %d then %d", len(segsBefore), len(segsAfter))
	}
	if err := g.Compact(70); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("compact twice: %v", err)
	}
	check := func(g *Group) {
		t.Helper()
		if f, _ := g.FirstIndex(); f != 71 {
			t.Fatalf("first %d", f)
		}
		if tm, err := g.Term(70); err != nil || tm != 2 {
			t.Fatalf("Term(70) = %d, %v", tm, err)
		}
		if _, err := g.Term(69); err != raft.ErrCompacted {
			t.Fatalf("Term(69): %v", err)
		}
	}
	check(g)
	must(t, s.Close())
	s = mustOpen(t, testOptions(fs))
	defer s.Close()
	check(mustGroup(t, s, 1))
}

// countingObserver counts what an Observer hears.
// Store.Sync calls it from concurrent goroutines (one per group), so it counts atomically.
type countingObserver struct{ fsyncs, batches, appends atomic.Int64 }

func (o *countingObserver) ObserveFsync(time.Duration) { o.fsyncs.Add(1) }
func (o *countingObserver) ObserveCommitBatch(n int)   { o.batches.Add(1); o.appends.Add(int64(n)) }

// TestObserverHearsEverySync: one Sync of three groups with new entries
// and hard states is three log fdatasyncs and one HardState-log fdatasync
// covering the three groups, and the Observer hears each.
func TestObserverHearsEverySync(t *testing.T) {
	obs := &countingObserver{}
	o := testOptions(vfs.NewMem())
	o.Observer = obs
	s := mustOpen(t, o)
	defer s.Close()
	var gs []*Group
	for id := uint64(1); id <= 3; id++ {
		g := mustGroup(t, s, id)
		must(t, g.Append(ents(1, 2, 1)))
		must(t, g.SetHardState(pb.HardState{Term: 1, Commit: 2}))
		gs = append(gs, g)
	}
	obs.fsyncs.Store(0)
	obs.batches.Store(0)
	obs.appends.Store(0)
	must(t, s.Sync(gs...))
	if f, b, a := obs.fsyncs.Load(), obs.batches.Load(), obs.appends.Load(); f != 4 || b != 1 || a != 3 {
		t.Fatalf("observer heard %d fdatasyncs and %d batches of %d appends, want 4 fdatasyncs and one batch of 3", f, b, a)
	}
}

// TestENOSPCHardStateLogRetried: a Sync whose HardState log finds the disk full fails
// none of its groups (an fdatasync error would): the HardState stays staged, the file
// holds nothing torn, and the next Sync, once there is room, makes it durable, as a power
// cut then shows. (multiraft retries such a round: diskfull.go.)
func TestENOSPCHardStateLogRetried(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	s := mustOpen(t, testOptions(efs))
	g := mustGroup(t, s, 1)
	must(t, g.Append(ents(1, 2, 1)))
	must(t, g.SetHardState(pb.HardState{Term: 1, Vote: 1, Commit: 1}))
	must(t, g.Sync())
	must(t, g.Append(ents(3, 4, 2)))
	must(t, g.SetHardState(pb.HardState{Term: 2, Vote: 2, Commit: 3}))
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Path: "raft/hardstate.wal", Err: syscall.ENOSPC, ShortWrite: 7})
	for range 2 {
		if err := s.Sync(g); !errors.Is(err, syscall.ENOSPC) || g.Err() != nil {
			t.Fatalf("Sync with a full HardState log: %v (group failed: %v), want ENOSPC and the group writable", err, g.Err())
		}
	}
	efs.ClearFaults()
	must(t, s.Sync(g))
	s.Close()
	mem.Crash()
	s = mustOpen(t, testOptions(efs)) // the HardState log read back from the file
	defer s.Close()
	g = mustGroup(t, s, 1)
	if hs, _, _ := g.InitialState(); hs != (pb.HardState{Term: 2, Vote: 2, Commit: 3}) {
		t.Fatalf("hard state after the retried Sync and a power cut: %+v, want term 2 vote 2 commit 3", hs)
	}
	if got, err := g.Entries(1, 5, noLimit); err != nil || len(got) != 4 {
		t.Fatalf("entries after the power cut: %v, %v", got, err)
	}
}
