package multiraft

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Quiescing (docs/cluster.md, "Quiescing"): a group with nothing to do stops ticking on
// every node, so it sends no heartbeats and holds no elections, and costs nothing per tick.
//
//   - The leader decides. After QuiesceAfterTicks ticks with no proposal and no entry, if
//     it has no Ready, no leadership transfer, everything committed
//     and applied, and every follower on a live node matched to its last index and recently
//     active, it stops ticking the group and sends each follower a heartbeat marked
//     Quiesce, carrying its term and commit index.
//   - A follower quiesces on that heartbeat only if it names the follower's leader and term
//     and the follower has committed and applied exactly that far; otherwise it steps it as
//     an ordinary heartbeat, and the reply wakes the leader, which tries again later. A
//     quiescing follower does not step the heartbeat, so it sends no reply.
//   - Any message for a quiesced group (but a quiesce heartbeat), a proposal, a transfer
//     or a campaign wakes it. The follower's election clock was frozen, not advanced, so a
//     woken follower does not campaign at once, and it still honours the leader's lease
//     (CheckQuorum), so a woken follower cannot unseat a quiet, live leader.
//   - A dead leader of a quiesced group says nothing, so its followers learn of it from the
//     node-pair liveness beat (liveness.go): when a peer node goes silent, every group this
//     node follows there wakes and forgets its leader, and the group elects a new one after
//     an election timeout. A follower that missed the quiesce heartbeat keeps ticking and
//     campaigns; its PreVote wakes the others and the leader, whose lease holds, and the
//     leader's heartbeats bring it back.

// maybeQuiesce quiesces g if this node leads it and it is idle and fully replicated.
func (h *Host) maybeQuiesce(g *group) bool {
	if g.removed { // woken by a message after its removal: nothing to tick for
		g.quiesced = true
		delete(h.active, g.id)
		return true
	}
	// (Waiting proposals do not keep a group awake: on a leader with everything committed
	// and applied none waits, and a node that lost the leadership its proposals were made
	// under fails them in that round: failDeposed.)
	if h.cfg.DisableQuiesce || g.idle < h.cfg.QuiesceAfterTicks {
		return false
	}
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader || bs.LeadTransferee != 0 || bs.Applied != bs.Commit {
		return false
	}
	if g.rn.HasReady() {
		return false
	}
	self := uint64(h.cfg.Node)
	last, ok := uint64(0), true
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == self {
			last = pr.Match
		}
	})
	if last != bs.Commit {
		return false
	}
	var to []uint64
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == self {
			return
		}
		if !h.peerAlive(NodeID(id)) {
			return // a dead follower must not keep the group awake; it is woken when it returns
		}
		if pr.Match != last || !pr.RecentActive || pr.State != tracker.StateReplicate {
			ok = false
		}
		to = append(to, id)
	})
	if !ok {
		return false
	}
	g.quiesced = true
	delete(h.active, g.id)
	h.stats.Quiesces++
	for _, id := range to {
		h.outbox = append(h.outbox, Message{Group: g.id, Quiesce: true, Msg: raftpb.Message{
			Type: raftpb.MsgHeartbeat, From: self, To: id, Term: bs.Term, Commit: bs.Commit}})
	}
	return true
}

// quiesceFollower handles a leader's quiesce heartbeat; it reports whether the follower
// quiesced (the message is then consumed, not stepped).
func (h *Host) quiesceFollower(g *group, m raftpb.Message) bool {
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateFollower || bs.Lead != m.From || bs.Term != m.Term ||
		bs.Commit != m.Commit || bs.Applied != bs.Commit || g.rn.HasReady() {
		return false
	}
	if !g.quiesced {
		g.quiesced = true
		delete(h.active, g.id)
		h.stats.Quiesces++
	}
	return true
}
