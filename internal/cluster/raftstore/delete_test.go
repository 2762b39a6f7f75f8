package raftstore

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestCompactDeletesInBackground: with DeleteInBackground, Compact answers for the new
// first index at once (the state file moved it) and the segments below go soon after;
// a reopen finds the same log.
func TestCompactDeletesInBackground(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs)
	o.DeleteInBackground = true
	s := mustOpen(t, o)
	g := mustGroup(t, s, 1)
	for i := uint64(1); i <= 100; i += 10 {
		must(t, g.Append(ents(i, i+9, 1+i/50)))
	}
	must(t, g.SetHardState(pb.HardState{Term: 2, Commit: 90}))
	must(t, g.Sync())
	_, err := g.CreateSnapshot(80, &pb.ConfState{Voters: []uint64{1}}, []byte("sm"))
	must(t, err)
	before, _ := g.log.SegmentSizes()
	must(t, g.Compact(70))
	if f, _ := g.FirstIndex(); f != 71 {
		t.Fatalf("first %d right after Compact", f)
	}
	if _, err := g.Entries(60, 71, noLimit); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("entries below first: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		after, _ := g.log.SegmentSizes()
		if len(after) < len(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no segment deleted in 5 s: %d then %d", len(before), len(after))
		}
	}
	if got, err := g.Entries(71, 101, noLimit); err != nil || len(got) != 30 {
		t.Fatalf("entries after compaction: %d, %v", len(got), err)
	}
	must(t, s.Close())
	s = mustOpen(t, o)
	g = mustGroup(t, s, 1)
	if f, _ := g.FirstIndex(); f != 71 {
		t.Fatalf("first %d after reopen", f)
	}
	if tm, err := g.Term(70); err != nil || tm != 2 {
		t.Fatalf("Term(70) = %d, %v after reopen", tm, err)
	}
	must(t, s.Close())
}

// TestBackgroundDeleteRaces runs appends, snapshots, compactions, cuts, snapshot
// installs and reads against the background deleter, then closes the group while it may
// still run (meant for -race): every read at or past first must see its entries.
func TestBackgroundDeleteRaces(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs)
	o.DeleteInBackground = true
	s := mustOpen(t, o)
	g := mustGroup(t, s, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a reader, as raft's Storage calls come from other goroutines
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			f, _ := g.FirstIndex()
			l, _ := g.LastIndex()
			if l >= f {
				if _, err := g.Entries(f, l+1, noLimit); err != nil && !errors.Is(err, raft.ErrCompacted) &&
					!errors.Is(err, raft.ErrUnavailable) {
					t.Errorf("Entries(%d, %d): %v", f, l+1, err)
					return
				}
			}
		}
	}()
	next, term := uint64(1), uint64(1)
	for round := 0; round < 200; round++ {
		must(t, g.Append(ents(next, next+9, term)))
		next += 10
		must(t, g.SetHardState(pb.HardState{Term: term, Commit: next - 1}))
		must(t, g.Sync())
		switch {
		case round%50 == 49: // a leader's snapshot replaces the log
			term++
			snap := pb.Snapshot{Data: []byte("x"), Metadata: pb.SnapshotMetadata{Index: next + 5, Term: term,
				ConfState: pb.ConfState{Voters: []uint64{1}}}}
			must(t, g.ApplySnapshot(snap))
			next += 6
		case round%7 == 6: // a new leader overwrites the last few entries
			term++
			next -= 3
		case round%3 == 2:
			_, err := g.CreateSnapshot(next-1, nil, []byte("sm"))
			must(t, err)
			must(t, g.Compact(next-5))
		}
	}
	close(stop)
	wg.Wait()
	must(t, s.Close())
}
