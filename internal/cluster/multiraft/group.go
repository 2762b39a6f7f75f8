package multiraft

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// group is one Raft group on this node. Its fields are guarded by Host.mu, except what the
// Ready loop alone touches (sm, applied, snapIndex), which readyMu serialises.
type group struct {
	id    GroupID
	rn    *raft.RawNode
	store *cachedStorage // the engine's Storage, with the unapplied entries in memory (entrycache.go)
	sm    StateMachine
	cs    raftpb.ConfState // as of the last applied configuration change

	applied   uint64
	snapIndex uint64 // index of the last snapshot taken here
	failed    error  // the state machine refused an entry: the group is stopped here

	quiesced bool
	idle     int // ticks since the last proposal, wake or entry
	removed  bool
	// blank: the replica has never held state (opened empty, with no voters) and no
	// leader has sent it the log yet. It grants no vote (voting.go).
	blank bool
	// preparing: a leader's snapshot is being prepared (prepare.go); the group takes no
	// Ready until it is done.
	preparing bool
	// encoding: a snapshot captured here is being encoded (encode.go); no other is taken
	// meanwhile. Owned by the Ready loop.
	encoding bool

	pending map[uint64]*Proposal // by sequence, until applied or failed
	byIndex map[uint64]*Proposal // by log index, once the proposal is in the log
	// fresh are the proposals made since the group's last Ready. The next Ready carries
	// their entries, unless a new leader's append overwrote them first: then nothing ever
	// will, and they fail as dropped.
	fresh []*Proposal
}

// GroupStatus is a group's state as this node sees it.
type GroupStatus struct {
	Group    GroupID
	Leader   NodeID // 0: none known
	Role     raft.StateType
	Term     uint64
	Commit   uint64
	Applied  uint64
	Quiesced bool
	Removed  bool // this node was taken out of the group
	Blank    bool // opened empty and not yet sent the log: it grants no vote (voting.go)
	Voters   []NodeID
	Learners []NodeID
	// InSync, on the leader only, are the voters (the leader included) whose log matches
	// the leader's up to its commit index and whose node is alive: Kafka's ISR. nil on a
	// follower, which does not know.
	InSync []NodeID
	// Transferring, on the leader only, is the node a leadership transfer under way goes
	// to (0: none); raft drops a transfer not done within an election timeout.
	Transferring NodeID
}

// Status returns group id's status on this node.
func (h *Host) Status(id GroupID) (GroupStatus, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[id]
	if g == nil {
		return GroupStatus{}, ErrGroupUnknown
	}
	bs := g.rn.BasicStatus()
	st := GroupStatus{Group: id, Leader: NodeID(bs.Lead), Role: bs.RaftState, Term: bs.Term,
		Commit: bs.Commit, Applied: bs.Applied, Quiesced: g.quiesced, Removed: g.removed, Blank: g.blank,
		Transferring: NodeID(bs.LeadTransferee)}
	for _, v := range g.cs.Voters {
		st.Voters = append(st.Voters, NodeID(v))
	}
	for _, v := range g.cs.Learners {
		st.Learners = append(st.Learners, NodeID(v))
	}
	if bs.RaftState == raft.StateLeader {
		prs := g.rn.Status().Progress
		for _, v := range st.Voters {
			if pr, ok := prs[uint64(v)]; ok && pr.Match >= bs.Commit && (v == h.cfg.Node || h.peerAlive(v)) {
				st.InSync = append(st.InSync, v)
			}
		}
	}
	return st, nil
}

// PeerAlive reports whether node n was heard from within the node timeout (liveness.go);
// this node itself, and a node that is not a peer, count as alive.
func (h *Host) PeerAlive(n NodeID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peerAlive(n)
}

// wake makes a quiesced group tick again, for at least QuiesceAfterTicks.
func (h *Host) wake(g *group) {
	if !g.quiesced {
		return
	}
	g.idle = 0
	g.quiesced = false
	h.active[g.id] = g
	h.stats.Wakes++
}

// failAll fails every waiting proposal of g.
func (g *group) failAll(err error) {
	for _, p := range g.pending {
		p.finish(0, err)
	}
	g.pending = map[uint64]*Proposal{}
	g.byIndex = map[uint64]*Proposal{}
	g.fresh = nil
}

func isMember(cs raftpb.ConfState, n NodeID) bool {
	for _, set := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		for _, v := range set {
			if v == uint64(n) {
				return true
			}
		}
	}
	return false
}
