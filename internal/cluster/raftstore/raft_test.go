package raftstore

import (
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// raftRounds is how many rounds the three-node test runs;
// RAFTSTORE_RAFT_ROUNDS raises it for a long run by hand.
func raftRounds() int {
	if n, err := strconv.Atoi(os.Getenv("RAFTSTORE_RAFT_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 1500
}

var raftVoters = pb.ConfState{Voters: []uint64{1, 2, 3}}

// rnode is one node of the three-node test: its own crashable disk, its
// store, the raft core on it, and a state machine that is the list of the
// proposals it applied.
type rnode struct {
	id      uint64
	mem     *vfs.MemFS
	s       *Store
	g       *Group
	rn      *raft.RawNode
	applied []string
	index   uint64 // applied index
	downFor int    // rounds until restart, while down
}

func (n *rnode) start(t *testing.T) {
	t.Helper()
	n.s = mustOpen(t, testOptions(n.mem))
	n.g = mustGroup(t, n.s, 1)
	snap, err := n.g.Snapshot()
	must(t, err)
	n.restore(snap)
	n.rn, err = raft.NewRawNode(&raft.Config{
		ID: n.id, ElectionTick: 10, HeartbeatTick: 2, Storage: n.g, Applied: n.index,
		MaxSizePerMsg: 4 << 10, MaxInflightMsgs: 32, PreVote: true,
		Logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)},
	})
	must(t, err)
}

func (n *rnode) restore(snap pb.Snapshot) {
	n.applied, n.index = nil, snap.Metadata.Index
	if len(snap.Data) > 0 {
		n.applied = strings.Split(string(snap.Data), ",")
	}
}

// ready handles every Ready as a host must: persist, then send, then
// apply.
func (n *rnode) ready(t *testing.T, out *[]pb.Message) {
	t.Helper()
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		persist(t, n.g, rd)
		if !raft.IsEmptySnap(rd.Snapshot) {
			n.restore(rd.Snapshot)
		}
		*out = append(*out, rd.Messages...)
		for _, e := range rd.CommittedEntries {
			if e.Index <= n.index {
				continue
			}
			if e.Type == pb.EntryNormal && len(e.Data) > 0 {
				n.applied = append(n.applied, string(e.Data))
			}
			n.index = e.Index
		}
		n.rn.Advance(rd)
	}
}

// compact snapshots the state machine and trims the log behind it,
// keeping a few entries for followers just behind.
func (n *rnode) compact(t *testing.T) {
	t.Helper()
	if n.index < n.g.snap.Index+20 {
		return
	}
	_, err := n.g.CreateSnapshot(n.index, &raftVoters, []byte(strings.Join(n.applied, ",")))
	must(t, err)
	must(t, n.g.Compact(n.index-5))
}

// TestThreeNodesWithCrashes runs three raft cores over raftstore, each on
// its own crashable disk, with proposals, dropped messages, snapshots and
// compactions, and nodes losing power (torn writes) and restarting. What
// any node ever applied is one history: no node applies a different entry
// at the same place, and once all are up, every node has all of it. A
// storage that lost a synced entry or vote lets two leaders commit
// different entries at one index, which breaks the first check.
func TestThreeNodesWithCrashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := make([]*rnode, 3)
	for k := range nodes {
		n := &rnode{id: uint64(k + 1), mem: vfs.NewMem()}
		s := mustOpen(t, testOptions(n.mem))
		g := mustGroup(t, s, 1)
		must(t, g.ApplySnapshot(pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 1, Term: 1, ConfState: raftVoters}}))
		must(t, s.Close())
		n.start(t)
		nodes[k] = n
	}
	var history []string
	var net []pb.Message
	proposed := 0
	round := func(faults bool) {
		for _, n := range nodes {
			if n.rn == nil {
				if n.downFor--; n.downFor <= 0 {
					n.start(t)
				}
				continue
			}
			n.rn.Tick()
			if faults && rng.IntN(100) < 40 {
				proposed++
				_ = n.rn.Propose([]byte(fmt.Sprint("p", proposed))) // dropped without a leader
			}
			n.ready(t, &net)
			if rng.IntN(10) == 0 {
				n.compact(t)
			}
			history = checkHistory(t, history, n)
		}
		msgs := net
		net = nil
		rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
		for _, m := range msgs {
			to, from := nodes[m.To-1], nodes[m.From-1]
			lost := to.rn == nil || (faults && m.Type != pb.MsgSnap && rng.IntN(100) < 5)
			if !lost {
				if err := to.rn.Step(m); err != nil && err != raft.ErrProposalDropped { // a forwarded proposal meets no leader
					t.Fatal(err)
				}
			}
			if m.Type == pb.MsgSnap && from.rn != nil {
				from.rn.ReportSnapshot(m.To, map[bool]raft.SnapshotStatus{false: raft.SnapshotFinish, true: raft.SnapshotFailure}[lost])
			}
		}
		if faults && rng.IntN(100) < 2 {
			if n := nodes[rng.IntN(3)]; n.rn != nil {
				n.mem.CrashWithTornWrites(rng) // power cut: unsynced bytes lost or torn
				n.rn, n.s, n.g, n.downFor = nil, nil, nil, 10+rng.IntN(40)
			}
		}
	}
	for range raftRounds() {
		round(true)
	}
	for range 400 { // heal: everyone up, no faults, until all applied everything
		round(false)
		done := true
		for _, n := range nodes {
			done = done && n.rn != nil && len(n.applied) == len(history)
		}
		if done {
			break
		}
	}
	for _, n := range nodes {
		if n.rn == nil || len(n.applied) != len(history) {
			t.Fatalf("node %d applied %d of %d entries after healing", n.id, len(n.applied), len(history))
		}
	}
	if len(history) < raftRounds()/10 {
		t.Fatalf("only %d of %d proposals applied: the cluster made little progress", len(history), proposed)
	}
	t.Logf("%d proposals, %d applied on every node", proposed, len(history))
}

// checkHistory fails unless n's applied list and the history so far are
// one a prefix of the other, and returns the longer.
func checkHistory(t *testing.T, history []string, n *rnode) []string {
	t.Helper()
	for i := range min(len(history), len(n.applied)) {
		if history[i] != n.applied[i] {
			t.Fatalf("node %d applied %q at position %d where another applied %q", n.id, n.applied[i], i, history[i])
		}
	}
	if len(n.applied) > len(history) {
		return slices.Clone(n.applied)
	}
	return history
}
