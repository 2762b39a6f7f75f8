package multiraft

import (
	"slices"

	"go.etcd.io/raft/v3"
)

// Node-pair liveness: the one signal that does not quiesce. Every LivenessTicks ticks a
// host sends each peer it sent nothing else to in that round an empty Batch; any batch from
// a peer counts as hearing from it. A peer not heard from for NodeTimeoutTicks is down:
// every quiesced group this node follows with the leader on that peer wakes and forgets its
// leader (raft's ForgetLeader, so its lease no longer blocks a PreVote) and elects anew.
// When a peer is heard from again, every quiesced group this node leads with a member on
// that peer wakes, so the returning replica is caught up. The cost is O(peers) per beat,
// whatever the number of groups.

type peer struct {
	lastHeard uint64
	alive     bool
}

func (h *Host) heard(n NodeID) {
	p := h.peers[n]
	if p == nil {
		return // not a configured peer: groups still work, but liveness does not watch it
	}
	p.lastHeard = h.clockNow() // while Run sleeps, h.now lags the time (sleep.go)
	if !p.alive {
		p.alive = true
		h.peerUp(n)
	}
}

// checkLiveness marks peers that went silent as down. Called on every tick, and for the
// ticks Run slept through (sleep.go). A peer heard while Run slept may have been heard
// after h.now (clockNow): it is not silent.
func (h *Host) checkLiveness() {
	for n, p := range h.peers {
		if p.alive && h.now > p.lastHeard && h.now-p.lastHeard > uint64(h.cfg.NodeTimeoutTicks) {
			p.alive = false
			h.peerDown(n)
		}
	}
}

func (h *Host) peerAlive(n NodeID) bool {
	p := h.peers[n]
	return p == nil || p.alive
}

func (h *Host) peerDown(n NodeID) {
	for _, g := range h.groups {
		if !g.quiesced || g.removed {
			continue
		}
		bs := g.rn.BasicStatus()
		if bs.RaftState == raft.StateFollower && bs.Lead == uint64(n) {
			h.wake(g)
			_ = g.rn.ForgetLeader()
			// The leader has been silent for NodeTimeoutTicks already: count them on the
			// election clock (frozen while quiesced), so the follower campaigns within
			// raft's randomised spread of what is left rather than a whole timeout later.
			for range h.cfg.NodeTimeoutTicks {
				g.rn.TickQuiesced()
			}
			h.markDirty(g)
		}
	}
}

func (h *Host) peerUp(n NodeID) {
	for _, g := range h.groups {
		if !g.quiesced || g.removed || !isMember(g.cs, n) {
			continue
		}
		if g.rn.BasicStatus().RaftState == raft.StateLeader {
			h.wake(g)
			h.markDirty(g)
		}
	}
}

// beatDue reports whether this round should beat the peers (under h.mu): a multiple of
// LivenessTicks (shifted by the beat's phase, sleep.go) was reached since the last beat.
// Reached, not equalled: a Run that woke late from a sleep may have moved the clock past
// it.
func (h *Host) beatDue() bool {
	every, phase := uint64(h.cfg.LivenessTicks), h.beatPhase()
	return len(h.peers) > 0 && (h.now+phase)/every > (h.beatAt+phase)/every
}

func (h *Host) peerIDs() []NodeID {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]NodeID, 0, len(h.peers))
	for n := range h.peers {
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return ids
}
