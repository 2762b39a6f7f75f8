package multiraft

import (
	"context"
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// An entry's data, as the host writes it: the proposing node and its sequence number (16
// bytes, big-endian), then the caller's bytes. The header lets the proposing node find its
// proposal when the entry is applied; the state machine never sees it.
const headerLen = 16

func encodeProposal(node NodeID, seq uint64, data []byte) []byte {
	b := make([]byte, headerLen+len(data))
	binary.BigEndian.PutUint64(b, uint64(node))
	binary.BigEndian.PutUint64(b[8:], seq)
	copy(b[headerLen:], data)
	return b
}

// decodeProposal splits an entry's data; ok is false for raft's own empty entries and for
// anything shorter than a header.
func decodeProposal(b []byte) (node NodeID, seq uint64, data []byte, ok bool) {
	if len(b) < headerLen {
		return 0, 0, nil, false
	}
	return NodeID(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint64(b[8:]), b[headerLen:], true
}

// Proposal is a proposal in flight: Done closes once it is applied on this node or failed.
type Proposal struct {
	seq   uint64
	asked uint64 // the leader's term when it was proposed
	term  uint64 // of its entry, once in the log
	index uint64
	err   error
	done  chan struct{}
}

// Done is closed when Result is ready.
func (p *Proposal) Done() <-chan struct{} { return p.done }

// Result is the proposal's log index once applied on this node, or why it failed. Valid
// once Done is closed.
func (p *Proposal) Result() (uint64, error) { return p.index, p.err }

func (p *Proposal) finish(index uint64, err error) {
	select {
	case <-p.done:
		return
	default:
	}
	p.index, p.err = index, err
	close(p.done)
}

// Propose proposes data to group id and returns once its entry is committed and applied on
// this node, with its index. It fails with *NotLeaderError on a node that does not lead the
// group, ErrGroupUnknown, ErrProposalDropped (not in the log, or its place in the log taken
// by another leader: retry), or the context's error — in which case the entry may still
// be applied later: its outcome is unknown.
func (h *Host) Propose(ctx context.Context, id GroupID, data []byte) (uint64, error) {
	p, err := h.ProposeAsync(id, data)
	if err != nil {
		return 0, err
	}
	return h.wait(ctx, id, p)
}

// ProposeAsync is Propose without the wait.
func (h *Host) ProposeAsync(id GroupID, data []byte) (*Proposal, error) {
	return h.propose(id, func(g *group, hdr []byte) error {
		return g.rn.Propose(append(hdr, data...))
	})
}

// ProposalHeadroom is how many bytes ProposeAsyncOwned needs free at the start of its
// buffer: the host's header (proposing node, sequence number).
const ProposalHeadroom = headerLen

// ProposeAsyncOwned is ProposeAsync for a buffer whose first ProposalHeadroom bytes are
// free, the proposal's data after them: the host writes its header there rather than copy
// the data behind a new one (a produce's entry is as large as the produce). The buffer is
// the host's from then on: the caller must neither change nor reuse it.
func (h *Host) ProposeAsyncOwned(id GroupID, buf []byte) (*Proposal, error) {
	if len(buf) < headerLen {
		return nil, fmt.Errorf("multiraft: group %d: a proposal buffer of %d bytes has no room for its header", id, len(buf))
	}
	return h.propose(id, func(g *group, hdr []byte) error {
		copy(buf, hdr)
		return g.rn.Propose(buf)
	})
}

// ChangeKind is one kind of membership change.
type ChangeKind int

const (
	AddVoter   ChangeKind = iota // a new voter, or a learner promoted
	AddLearner                   // a non-voting member that receives the log
	RemoveNode                   // a voter or learner leaves
)

// Change is one membership change.
type Change struct {
	Kind ChangeKind
	Node NodeID
}

// ChangeMembership proposes one ConfChangeV2 with the given changes (more than one goes
// through joint consensus, left automatically) and returns once it is applied on this node.
// Raft allows one change in flight per group: a second fails with ErrProposalDropped.
func (h *Host) ChangeMembership(ctx context.Context, id GroupID, changes ...Change) (uint64, error) {
	p, err := h.ChangeMembershipAsync(id, changes...)
	if err != nil {
		return 0, err
	}
	return h.wait(ctx, id, p)
}

// ChangeMembershipAsync is ChangeMembership without the wait.
func (h *Host) ChangeMembershipAsync(id GroupID, changes ...Change) (*Proposal, error) {
	cc := raftpb.ConfChangeV2{}
	for _, c := range changes {
		t := raftpb.ConfChangeAddNode
		switch c.Kind {
		case AddLearner:
			t = raftpb.ConfChangeAddLearnerNode
		case RemoveNode:
			t = raftpb.ConfChangeRemoveNode
		}
		cc.Changes = append(cc.Changes, raftpb.ConfChangeSingle{Type: t, NodeID: uint64(c.Node)})
	}
	return h.propose(id, func(g *group, hdr []byte) error {
		cc.Context = hdr
		return g.rn.ProposeConfChange(cc)
	})
}

// propose registers a proposal on the leader and hands it to raft through do.
func (h *Host) propose(id GroupID, do func(*group, []byte) error) (*Proposal, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrStopped
	}
	if h.storageErr != nil {
		return nil, h.storageErr
	}
	g := h.groups[id]
	if g == nil {
		return nil, ErrGroupUnknown
	}
	if g.failed != nil {
		return nil, g.failed
	}
	if g.removed {
		return nil, ErrRemoved
	}
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		return nil, &NotLeaderError{Group: id, Leader: NodeID(bs.Lead)}
	}
	h.nextSeq++
	p := &Proposal{seq: h.nextSeq, asked: bs.Term, done: make(chan struct{})}
	h.wake(g)
	g.idle = 0
	if err := do(g, encodeProposal(h.cfg.Node, p.seq, nil)); err != nil {
		if err == raft.ErrProposalDropped {
			return nil, ErrProposalDropped
		}
		return nil, fmt.Errorf("multiraft: group %d: %w", id, err)
	}
	g.pending[p.seq] = p
	g.fresh = append(g.fresh, p)
	h.markDirty(g)
	h.signal()
	return p, nil
}

func (h *Host) wait(ctx context.Context, id GroupID, p *Proposal) (uint64, error) {
	select {
	case <-p.Done():
		return p.Result()
	case <-ctx.Done():
		h.mu.Lock()
		select {
		case <-p.Done(): // finished as the context ended: the answer is known
			h.mu.Unlock()
			return p.Result()
		default:
		}
		if g := h.groups[id]; g != nil {
			delete(g.pending, p.seq)
			if p.index != 0 && g.byIndex[p.index] == p {
				delete(g.byIndex, p.index)
			}
		}
		h.mu.Unlock()
		return 0, fmt.Errorf("multiraft: group %d: proposal outcome unknown: %w", id, ctx.Err())
	}
}

// TransferLeadership asks group id's leader to hand leadership to node to. It returns at
// once; the transfer is done when Status shows the new leader (raft gives up on it after an
// election timeout).
func (h *Host) TransferLeadership(id GroupID, to NodeID) error {
	return h.withGroup(id, func(g *group) { g.rn.TransferLeader(uint64(to)) })
}

// Campaign makes this node stand for election in group id now (PreVote first), rather than
// after an election timeout: for bootstrap and tests.
func (h *Host) Campaign(id GroupID) error {
	return h.withGroup(id, func(g *group) { _ = g.rn.Campaign() })
}

func (h *Host) withGroup(id GroupID, do func(*group)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrStopped
	}
	g := h.groups[id]
	if g == nil {
		return ErrGroupUnknown
	}
	h.wake(g)
	do(g)
	h.markDirty(g)
	h.signal()
	return nil
}
