package raftstore

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestRemoveGroupAtEveryCrashPoint: a group of term 5 (vote 2, five
// entries) is removed and a new replica of the same id created and
// synced; a crash before any file-system operation of that leaves the old
// replica whole or a new one, never a mix: above all never the old term
// and vote over an empty log (a new replica that votes with the removed
// one's state, or fails to open with its commit past its log).
func TestRemoveGroupAtEveryCrashPoint(t *testing.T) {
	old := pb.HardState{Term: 5, Vote: 2, Commit: 5}
	for k := 1; ; k++ {
		mem := vfs.NewMem()
		s := mustOpen(t, testOptions(mem))
		g := mustGroup(t, s, 3)
		must(t, g.Append(ents(1, 5, 2)))
		must(t, g.SetHardState(old))
		must(t, g.Sync())
		must(t, s.Close())

		r := &crashRun{mem: mem, rng: rand.New(rand.NewPCG(uint64(k), 3)), crashAt: k}
		efs := vfs.NewErrorFS(mem)
		efs.Inject(vfs.Fault{Match: r.hook})
		func() {
			s, err := Open(testOptions(efs))
			if err != nil {
				return
			}
			if s.RemoveGroup(3) != nil {
				return
			}
			g, err := s.Group(3)
			if err != nil || g.Append(ents(1, 1, 1)) != nil || g.SetHardState(pb.HardState{Term: 1, Commit: 1}) != nil {
				return
			}
			g.Sync()
		}()
		if !r.crashed {
			if k < 10 {
				t.Fatalf("only %d file-system operations", k)
			}
			return
		}
		s = mustOpen(t, testOptions(mem))
		g, err := s.Group(3)
		if err != nil {
			t.Fatalf("crash at op %d: reopen: %v", k, err)
		}
		hs, _, _ := g.InitialState()
		last, _ := g.LastIndex()
		switch {
		case hs == old:
			if got, err := g.Entries(1, last+1, noLimit); err != nil || len(got) != 5 || got[4].Term != 2 {
				t.Fatalf("crash at op %d: old hard state over entries %v, %v", k, got, err)
			}
		case hs.Term <= 1 && hs.Vote == 0:
			if tm, _ := g.Term(last); last > 1 || tm > 1 {
				t.Fatalf("crash at op %d: a new replica holds the old log (last %d, term %d)", k, last, tm)
			}
		default:
			t.Fatalf("crash at op %d: hard state %+v", k, hs)
		}
		s.Close()
	}
}
