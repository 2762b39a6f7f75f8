package multiraft

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// Membership is a group's configuration as this node last applied it and, on the leader,
// how far each member's log matches the leader's: what a replica move is driven by (the
// caller adds a learner, waits for it to catch up, promotes it and removes the old voter,
// each step checked against this).
type Membership struct {
	Leader   NodeID // 0: none known
	IsLeader bool
	Term     uint64
	Commit   uint64
	Voters   []NodeID
	// Outgoing are the voters of the outgoing configuration while the group is in joint
	// consensus (raft leaves it by itself); LearnersNext the learners it will have then.
	Outgoing     []NodeID
	Learners     []NodeID
	LearnersNext []NodeID
	// Match, on the leader only, is each member's highest log index known to match the
	// leader's; Replicating whether the leader streams entries to it (not probing, not
	// sending it a snapshot).
	Match       map[NodeID]uint64
	Replicating map[NodeID]bool
}

// Joint reports whether the group is in joint consensus (a change not yet finished).
func (m Membership) Joint() bool { return len(m.Outgoing) > 0 || len(m.LearnersNext) > 0 }

// CaughtUp reports, on the leader, whether member n's log is within slack entries of the
// leader's commit index and streamed to: a learner that may be promoted without costing
// the group its availability.
func (m Membership) CaughtUp(n NodeID, slack uint64) bool {
	if !m.IsLeader {
		return false
	}
	if n == m.Leader {
		return true
	}
	match, ok := m.Match[n]
	return ok && m.Replicating[n] && match > 0 && match+slack >= m.Commit
}

// Membership returns group id's configuration and, on its leader, its members' progress.
func (h *Host) Membership(id GroupID) (Membership, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[id]
	if g == nil {
		return Membership{}, ErrGroupUnknown
	}
	bs := g.rn.BasicStatus()
	m := Membership{Leader: NodeID(bs.Lead), IsLeader: bs.RaftState == raft.StateLeader, Term: bs.Term, Commit: bs.Commit,
		Voters: nodes(g.cs.Voters), Outgoing: nodes(g.cs.VotersOutgoing), Learners: nodes(g.cs.Learners),
		LearnersNext: nodes(g.cs.LearnersNext)}
	if m.IsLeader {
		m.Match, m.Replicating = map[NodeID]uint64{}, map[NodeID]bool{}
		g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			m.Match[NodeID(id)] = pr.Match
			m.Replicating[NodeID(id)] = pr.State == tracker.StateReplicate
		})
	}
	return m, nil
}

func nodes(ids []uint64) []NodeID {
	out := make([]NodeID, len(ids))
	for i, v := range ids {
		out[i] = NodeID(v)
	}
	return out
}

// AddPeer makes node n a peer of this host's liveness signal (liveness.go): a node added
// to the cluster after this host started. A peer already known is left as it is.
func (h *Host) AddPeer(n NodeID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n == 0 || n == h.cfg.Node || h.peers[n] != nil {
		return
	}
	h.peers[n] = &peer{lastHeard: h.clockNow(), alive: true}
}

// RemovePeer stops watching node n's liveness (a node removed from the cluster).
func (h *Host) RemovePeer(n NodeID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.peers, n)
}
