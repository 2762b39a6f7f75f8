package raftstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// modelSteps is how many random operations each seed of the model test
// runs; RAFTSTORE_MODEL_STEPS raises it for a long run by hand.
func modelSteps() int {
	if n, err := strconv.Atoi(os.Getenv("RAFTSTORE_MODEL_STEPS")); err == nil && n > 0 {
		return n
	}
	return 400
}

// model drives a Group and raft.MemoryStorage (the reference) with the
// same random operations: appends (often cutting a conflicting suffix),
// hard states, syncs, snapshots created and applied, compactions and clean
// reopens; every read is compared after every step.
type model struct {
	t     *testing.T
	rng   *rand.Rand
	fs    *vfs.MemFS
	s     *Store
	g     *Group
	ref   *raft.MemoryStorage
	term  uint64 // highest term handed out
	steps int
}

func TestModelAgainstMemoryStorage(t *testing.T) {
	defer func(n int64) { walMinLimit = n }(walMinLimit)
	walMinLimit = 200
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			m := &model{t: t, rng: rand.New(rand.NewPCG(seed, 99)), fs: vfs.NewMem(), ref: raft.NewMemoryStorage(), term: 1}
			m.s = mustOpen(t, testOptions(m.fs))
			m.g = mustGroup(t, m.s, 1)
			defer func() { m.s.Close() }()
			for m.steps = 0; m.steps < modelSteps(); m.steps++ {
				m.step()
				m.compare()
			}
		})
	}
}

func (m *model) step() {
	first, _ := m.ref.FirstIndex()
	last, _ := m.ref.LastIndex()
	hs, _, _ := m.ref.InitialState()
	snap, _ := m.ref.Snapshot()
	S := snap.Metadata.Index
	switch r := m.rng.IntN(100); {
	case r < 45: // append, cutting a suffix one time in three
		at := last + 1
		if last >= first && m.rng.IntN(3) == 0 {
			at = max(hs.Commit+1, first) + uint64(m.rng.IntN(int(last-max(hs.Commit+1, first)+2)))
			at = min(at, last+1)
		}
		if m.rng.IntN(4) == 0 {
			m.term++
		}
		es := m.randEntries(at, 1+m.rng.IntN(6), m.term)
		m.both(m.ref.Append(es), m.g.Append(es), "append")
	case r < 60: // a hard state committing some of the log
		c := hs.Commit
		if last > c {
			c += uint64(m.rng.IntN(int(last-c) + 1))
		}
		h := pb.HardState{Term: m.term, Vote: uint64(m.rng.IntN(4)), Commit: c}
		m.both(m.ref.SetHardState(h), m.g.SetHardState(h), "hard state")
	case r < 75:
		must(m.t, m.g.Sync())
	case r < 82: // snapshot of the applied state
		if hs.Commit > S && hs.Commit >= first-1 {
			i := S + 1 + uint64(m.rng.IntN(int(hs.Commit-S)))
			i = max(i, first-1)
			cs := &pb.ConfState{Voters: []uint64{1, uint64(2 + m.rng.IntN(5))}}
			data := m.randData()
			_, e1 := m.ref.CreateSnapshot(i, cs, data)
			_, e2 := m.g.CreateSnapshot(i, cs, data)
			m.both(e1, e2, "create snapshot")
		}
	case r < 90: // compaction up to the snapshot
		if S >= first {
			i := first + uint64(m.rng.IntN(int(S-first)+1))
			m.both(m.ref.Compact(i), m.g.Compact(i), "compact")
		}
	case r < 95: // a snapshot from a leader, ahead of or inside the log
		i := max(S, hs.Commit) + 1 + uint64(m.rng.IntN(8))
		m.term++
		sn := pb.Snapshot{Data: m.randData(), Metadata: pb.SnapshotMetadata{Index: i, Term: m.term,
			ConfState: pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}}}
		m.both(m.ref.ApplySnapshot(sn), m.g.ApplySnapshot(sn), "apply snapshot")
		h := pb.HardState{Term: m.term, Commit: i}
		m.both(m.ref.SetHardState(h), m.g.SetHardState(h), "hard state after snapshot")
	default: // a clean restart, after a sync (unsynced hard states are not promised)
		must(m.t, m.g.Sync())
		must(m.t, m.s.Close())
		m.s = mustOpen(m.t, testOptions(m.fs))
		m.g = mustGroup(m.t, m.s, 1)
	}
}

func (m *model) randEntries(at uint64, n int, term uint64) []pb.Entry {
	es := make([]pb.Entry, n)
	for k := range es {
		es[k] = pb.Entry{Index: at + uint64(k), Term: term, Type: pb.EntryType(m.rng.IntN(3)), Data: m.randData()}
	}
	return es
}

func (m *model) randData() []byte {
	switch m.rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return bytes.Repeat([]byte{byte(m.rng.IntN(256))}, m.rng.IntN(300))
}

// both fails unless the reference and the group agree on success.
func (m *model) both(want, got error, op string) {
	m.t.Helper()
	if os.Getenv("RAFTSTORE_MODEL_TRACE") != "" {
		m.t.Logf("step %d: %s: %v %v (log start %d, first %d)", m.steps, op, want, got, m.g.logStart, m.g.first)
	}
	if (want == nil) != (got == nil) {
		m.t.Fatalf("step %d %s: reference %v, group %v", m.steps, op, want, got)
	}
}

func (m *model) compare() {
	t := m.t
	t.Helper()
	rf, _ := m.ref.FirstIndex()
	rl, _ := m.ref.LastIndex()
	gf, _ := m.g.FirstIndex()
	gl, _ := m.g.LastIndex()
	if rf != gf || rl != gl {
		t.Fatalf("step %d: first/last: reference %d/%d, group %d/%d", m.steps, rf, rl, gf, gl)
	}
	for i := rf - min(rf, 2); i <= rl+2; i++ {
		rt, re := m.ref.Term(i)
		gt, ge := m.g.Term(i)
		if rt != gt || re != ge {
			t.Fatalf("step %d: Term(%d): reference %d %v, group %d %v", m.steps, i, rt, re, gt, ge)
		}
	}
	for range 4 {
		lo := rf - min(rf, 1) + uint64(m.rng.IntN(int(rl-rf+3)))
		hi := min(lo+uint64(m.rng.IntN(10)), rl+1)
		if lo > hi {
			continue
		}
		max := []uint64{0, 100, 400, noLimit}[m.rng.IntN(4)]
		re, rerr := m.ref.Entries(lo, hi, max)
		ge, gerr := m.g.Entries(lo, hi, max)
		if rerr != gerr || len(re) != len(ge) || (len(re) > 0 && !reflect.DeepEqual(re, ge)) {
			t.Fatalf("step %d: Entries(%d, %d, %d):\nreference %v %v\n    group %v %v", m.steps, lo, hi, max, re, rerr, ge, gerr)
		}
	}
	rh, rc, _ := m.ref.InitialState()
	gh, gc, _ := m.g.InitialState()
	if rh != gh || !reflect.DeepEqual(rc, gc) {
		t.Fatalf("step %d: InitialState: reference %+v %+v, group %+v %+v", m.steps, rh, rc, gh, gc)
	}
	rs, _ := m.ref.Snapshot()
	gs, err := m.g.Snapshot()
	if err != nil || !reflect.DeepEqual(rs.Metadata, gs.Metadata) || !bytes.Equal(rs.Data, gs.Data) {
		t.Fatalf("step %d: Snapshot: reference %+v, group %+v %v", m.steps, rs.Metadata, gs.Metadata, err)
	}
}
