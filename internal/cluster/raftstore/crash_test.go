package raftstore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/internal/testrace"
	"github.com/sluice-mq/sluice/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// crashSteps is how many operations the crash workload runs (each run
// crashes before one file-system operation of it, every one in turn);
// RAFTSTORE_CRASH_STEPS raises it for a long run by hand (250: ~1,500
// crash points, 8 s without -race; 120 by default, ~5 s with -race).
func crashSteps() int {
	if n, err := strconv.Atoi(os.Getenv("RAFTSTORE_CRASH_STEPS")); err == nil && n > 0 {
		return n
	}
	return 120
}

// expect is what a crash must leave of one group: the entries a completed
// Sync made durable (minus those a later call may have cut), the
// (term, vote) pairs the state file may hold, and every entry and
// snapshot ever written, so nothing else can appear.
type expect struct {
	must    map[uint64]pb.Entry
	written map[uint64][]pb.Entry
	allowed []pb.HardState
	commit  uint64 // the commit of the last completed Sync that changed a term or vote
	minSnap uint64
	snaps   map[uint64]uint64 // snapshot index -> term
}

func newExpect() *expect {
	return &expect{must: map[uint64]pb.Entry{}, written: map[uint64][]pb.Entry{}, allowed: []pb.HardState{{}}, snaps: map[uint64]uint64{0: 0}}
}

func (e *expect) clone() *expect {
	c := *e
	c.must, c.written, c.snaps = maps.Clone(e.must), maps.Clone(e.written), maps.Clone(e.snaps)
	c.allowed = append([]pb.HardState(nil), e.allowed...)
	return &c
}

// crashRun is one run of the workload over two groups synced together,
// crashing (with torn writes) before the crashAt-th mutating file-system
// operation. Every operation after the crash fails, as on a dead machine.
type crashRun struct {
	mem     *vfs.MemFS
	rng     *rand.Rand
	mu      sync.Mutex // guards the fields below, read by the fault hook
	ops     int
	crashAt int
	crashed bool
	exps    []*expect // live expectations, one per group
	atCrash []*expect // their copies at the crash
}

func (r *crashRun) hook(op vfs.Op, _ string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.crashed {
		return true
	}
	switch op {
	case vfs.OpReadAt, vfs.OpList, vfs.OpStat, vfs.OpOpen:
		return false
	}
	r.ops++
	if r.ops != r.crashAt {
		return false
	}
	r.crashed = true
	for _, e := range r.exps {
		r.atCrash = append(r.atCrash, e.clone())
	}
	r.mem.CrashWithTornWrites(r.rng)
	return true
}

// update changes a live expectation under the hook's lock.
func (r *crashRun) update(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
}

// TestCrashAtEveryPoint runs a workload of appends (with conflicting
// cuts), hard states, syncs of two groups at once, snapshots created and
// installed and compactions, crashes it before each file-system operation
// in turn (keeping a random torn prefix of unsynced appends), reopens, and
// checks what Sync promised: synced entries there, no entry never
// written, a (term, vote) never forgotten nor invented, commit within the
// log, a snapshot no older than the last one written.
func TestCrashAtEveryPoint(t *testing.T) {
	testrace.NotUnderRace(t)
	defer func(n int64) { walMinLimit = n }(walMinLimit)
	walMinLimit = 400                  // rewrite the HardState log every few Syncs: crash inside those too
	total := runCrashWorkload(t, 0, 1) // count the operations of a run without a crash
	if total < 50 {
		t.Fatalf("workload made only %d file-system operations", total)
	}
	t.Logf("%d file-system operations, a crash before each", total)
	for k := 1; k <= total; k++ {
		runCrashWorkload(t, k, uint64(k))
	}
}

func runCrashWorkload(t *testing.T, crashAt int, seed uint64) int {
	t.Helper()
	r := &crashRun{mem: vfs.NewMem(), rng: rand.New(rand.NewPCG(seed, 7)), crashAt: crashAt}
	efs := vfs.NewErrorFS(r.mem)
	efs.Inject(vfs.Fault{Match: r.hook})
	s, err := Open(testOptions(efs))
	if err != nil {
		return r.finish(t)
	}
	var gs []*Group
	for id := uint64(1); id <= 2; id++ {
		g, err := s.Group(id)
		if err != nil {
			return r.finish(t)
		}
		gs = append(gs, g)
		r.exps = append(r.exps, newExpect())
	}
	w := rand.New(rand.NewPCG(42, 42)) // the same workload in every run
	terms := []uint64{1, 1}
	for range crashSteps() {
		if err := crashStep(r, s, gs, terms, w); err != nil {
			break
		}
	}
	s.Close()
	return r.finish(t)
}

// crashStep runs one operation on a group chosen by w.
func crashStep(r *crashRun, s *Store, gs []*Group, terms []uint64, w *rand.Rand) error {
	k := w.IntN(len(gs))
	g, e := gs[k], r.exps[k]
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	hs, _, _ := g.InitialState()
	S := g.snap.Index
	switch op := w.IntN(100); {
	case op < 40:
		at := last + 1
		if last > hs.Commit && w.IntN(3) == 0 {
			at = hs.Commit + 1 + uint64(w.IntN(int(last-hs.Commit)))
			at = max(at, first)
		}
		if w.IntN(4) == 0 {
			terms[k]++
		}
		es := ents(at, at+uint64(w.IntN(5)), terms[k])
		for i := range es {
			es[i].Data = append(es[i].Data, make([]byte, w.IntN(200))...)
		}
		r.update(func() {
			for i := range e.must {
				if i >= at {
					delete(e.must, i)
				}
			}
			for _, x := range es {
				e.written[x.Index] = append(e.written[x.Index], x)
			}
		})
		return g.Append(es)
	case op < 60:
		h := pb.HardState{Term: terms[k], Vote: uint64(w.IntN(4)), Commit: hs.Commit + uint64(w.IntN(int(last-hs.Commit)+1))}
		r.update(func() { e.allowed = append(e.allowed, h) })
		return g.SetHardState(h)
	case op < 80:
		if err := s.Sync(gs...); err != nil {
			return err
		}
		// Read what is now durable before taking the hook's lock: reads
		// pass through it.
		fresh := make([]*expect, len(gs))
		for i, g := range gs {
			hs, _, _ := g.InitialState()
			f, _ := g.FirstIndex()
			l, _ := g.LastIndex()
			ex := &expect{allowed: []pb.HardState{hs}, commit: hs.Commit, must: map[uint64]pb.Entry{}}
			if l >= f {
				es, err := g.Entries(f, l+1, noLimit)
				if err != nil {
					return err
				}
				for _, x := range es {
					ex.must[x.Index] = x
				}
			}
			fresh[i] = ex
		}
		r.update(func() {
			// The commit index is durable only through a Sync that also changed some
			// group's (term, vote): one that only moved commits writes them unsynced.
			moved := false
			for i, ex := range fresh {
				old := r.exps[i].allowed[0]
				moved = moved || old.Term != ex.allowed[0].Term || old.Vote != ex.allowed[0].Vote
			}
			for i, ex := range fresh {
				r.exps[i].allowed, r.exps[i].must = ex.allowed, ex.must
				if moved {
					r.exps[i].commit = ex.commit
				}
			}
		})
	case op < 88:
		if hs.Commit > S && hs.Commit >= first {
			i := hs.Commit
			tm, _ := g.Term(i)
			r.update(func() { e.snaps[i] = tm })
			if _, err := g.CreateSnapshot(i, &pb.ConfState{Voters: []uint64{1, 2, 3}}, []byte(fmt.Sprint("sm", i))); err != nil {
				return err
			}
			r.update(func() { e.minSnap = i })
		}
	case op < 95:
		if S >= first {
			r.update(func() {
				for i := range e.must {
					if i <= S {
						delete(e.must, i)
					}
				}
			})
			return g.Compact(S)
		}
	default:
		terms[k]++
		i := max(S, hs.Commit) + 1 + uint64(w.IntN(5))
		sn := pb.Snapshot{Data: []byte("leader"), Metadata: pb.SnapshotMetadata{Index: i, Term: terms[k], ConfState: pb.ConfState{Voters: []uint64{1, 2}}}}
		r.update(func() { e.must, e.snaps[i] = map[uint64]pb.Entry{}, terms[k] })
		if err := g.ApplySnapshot(sn); err != nil {
			return err
		}
		r.update(func() { e.minSnap = i })
	}
	return nil
}

// finish reopens what the crash left (or the clean end of a run without
// one) and checks it against the expectations; it returns how many
// mutating operations the run made.
func (r *crashRun) finish(t *testing.T) int {
	t.Helper()
	exps := r.atCrash
	if !r.crashed {
		exps = r.exps
		r.mem.Crash() // the end of a clean run is also a crash point
	}
	s, err := Open(testOptions(r.mem))
	if err != nil {
		t.Fatalf("crash at op %d: reopen: %v", r.crashAt, err)
	}
	defer s.Close()
	for k, e := range exps {
		g, err := s.Group(uint64(k + 1))
		if err != nil {
			t.Fatalf("crash at op %d: group %d: %v", r.crashAt, k+1, err)
		}
		if err := checkCrash(g, e); err != nil {
			t.Fatalf("crash at op %d: group %d: %v", r.crashAt, k+1, err)
		}
	}
	return r.ops
}

func checkCrash(g *Group, e *expect) error {
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	hs, _, _ := g.InitialState()
	snap, err := g.Snapshot()
	if err != nil {
		return err
	}
	S := snap.Metadata.Index
	if tm, ok := e.snaps[S]; S < e.minSnap || !ok || tm != snap.Metadata.Term {
		return fmt.Errorf("snapshot %d/%d: want at least %d, one that was written", S, snap.Metadata.Term, e.minSnap)
	}
	if first-1 > S {
		return fmt.Errorf("first index %d past the snapshot %d", first, S)
	}
	if hs.Commit < S {
		return fmt.Errorf("commit %d below the snapshot %d: raft would refuse Applied = %d", hs.Commit, S, S)
	}
	if hs.Commit > last || hs.Commit+1 < first || hs.Commit < e.commit {
		return fmt.Errorf("commit %d outside [%d, %d] or below the synced %d", hs.Commit, first-1, last, e.commit)
	}
	if !slicesContainsTermVote(e.allowed, hs) {
		return fmt.Errorf("hard state %+v: (term, vote) not one of %+v", hs, e.allowed)
	}
	var got []pb.Entry
	if last >= first {
		if got, err = g.Entries(first, last+1, noLimit); err != nil {
			return err
		}
	}
	for _, x := range got {
		if !slicesContainsEntry(e.written[x.Index], x) {
			return fmt.Errorf("entry %d/%d was never written there", x.Index, x.Term)
		}
		if tm, err := g.Term(x.Index); err != nil || tm != x.Term {
			return fmt.Errorf("Term(%d) = %d, %v; entry has %d", x.Index, tm, err, x.Term)
		}
	}
	for i, x := range e.must {
		if i < first {
			continue
		}
		if i > last || !reflect.DeepEqual(got[i-first], x) {
			return fmt.Errorf("synced entry %d/%d lost (log [%d, %d])", i, x.Term, first, last)
		}
	}
	if _, err := g.Term(first - 1); err != nil {
		return fmt.Errorf("Term(first-1 = %d): %v", first-1, err)
	}
	return nil
}

func slicesContainsTermVote(hs []pb.HardState, h pb.HardState) bool {
	for _, a := range hs {
		if a.Term == h.Term && a.Vote == h.Vote {
			return true
		}
	}
	return false
}

func slicesContainsEntry(es []pb.Entry, x pb.Entry) bool {
	for _, a := range es {
		if reflect.DeepEqual(a, x) {
			return true
		}
	}
	return false
}
