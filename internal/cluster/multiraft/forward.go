package multiraft

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// ProposeForward proposes data to group id from any member: on the leader it is an
// ordinary proposal, on a follower that knows its leader the entry travels to the leader in
// the next round as raft's own forwarded proposal (a MsgProp) would. Either way nothing
// reports its outcome here: the proposal may be lost (the leader moved, the batch dropped)
// and is never retried. The caller learns the outcome from its state machine, by naming
// the command (origin and request inside data) and waiting to see it applied, and retries
// only commands whose repetition is harmless. It fails with *NotLeaderError{Leader: 0}
// when no leader is known, ErrGroupUnknown, ErrStopped or ErrRemoved.
//
// Why not raft's forwarding: every group runs with DisableProposalForwarding so that
// Propose can say who leads; the metadata group's few writes from followers (a node
// registering its addresses, a topic created through a follower) come through here.
func (h *Host) ProposeForward(id GroupID, data []byte) error {
	return h.forward(id, data, true)
}

// ProposeEmpty proposes an entry without data from any member, as ProposeForward does (and
// as unreliably). No state machine is given it — raft's own entry at an election is one —
// but every replica applies it, and its host then asks the state machine whether it wants
// a snapshot (SnapshotWanter), as after any apply: how a group nobody writes to gets a
// snapshot on every replica when its state machines want one (a checkpoint whose format
// grew when the cluster's feature level rose). Every build skips an entry shorter than a
// proposal's header, so no feature level guards this one.
func (h *Host) ProposeEmpty(id GroupID) error {
	return h.forward(id, nil, false)
}

// forward proposes data to group id, behind this host's proposal header if withHeader.
func (h *Host) forward(id GroupID, data []byte, withHeader bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrStopped
	}
	if h.storageErr != nil {
		return h.storageErr
	}
	g := h.groups[id]
	switch {
	case g == nil:
		return ErrGroupUnknown
	case g.failed != nil:
		return g.failed
	case g.removed:
		return ErrRemoved
	}
	bs := g.rn.BasicStatus()
	var entry []byte
	if withHeader {
		h.nextSeq++
		entry = append(encodeProposal(h.cfg.Node, h.nextSeq, nil), data...)
	}
	h.wake(g)
	g.idle = 0
	switch {
	case bs.RaftState == raft.StateLeader:
		if err := g.rn.Propose(entry); err != nil {
			return ErrProposalDropped
		}
		h.markDirty(g)
	case bs.Lead == raft.None:
		return &NotLeaderError{Group: id}
	default:
		h.outbox = append(h.outbox, Message{Group: id, Msg: raftpb.Message{
			Type: raftpb.MsgProp, From: uint64(h.cfg.Node), To: bs.Lead,
			Entries: []raftpb.Entry{{Data: entry}}}})
	}
	h.signal()
	return nil
}
