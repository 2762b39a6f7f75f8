package multiraft

import (
	"context"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// SnapshotPreparer is an optional interface of a StateMachine whose Restore of a snapshot
// may take long: a replicated partition pulls the records a checkpoint names from a peer.
// Done in the Ready loop, that would hold every group of the node for the length of the
// pull. So when a leader's snapshot arrives, the host first hands it to PrepareSnapshot on a
// goroutine of its own, and steps it into raft only once that returned nil; meanwhile the
// group takes no Ready (nothing is applied to the state machine, nothing is sent), and
// further snapshots for it are dropped (the leader sends again). An error drops the
// snapshot too. Restore still follows, in the Ready loop, and finds the work done.
//
// PrepareSnapshot must leave the state machine as Restore expects it (it may add what
// Restore would fetch, never cut what was applied: raft may yet refuse the snapshot as
// stale). ctx ends when the host closes.
type SnapshotPreparer interface {
	PrepareSnapshot(ctx context.Context, data []byte) error
}

// maybePrepare starts preparing a leader's snapshot for g's state machine, if it is a
// SnapshotPreparer; it reports whether the message was taken (started, or dropped because a
// preparation is under way). Called with h.mu held.
func (h *Host) maybePrepare(g *group, m raftpb.Message) bool {
	sp, ok := g.sm.(SnapshotPreparer)
	if !ok || m.Type != raftpb.MsgSnap || m.Snapshot == nil {
		return false
	}
	if g.preparing {
		return true
	}
	if h.prepFull != nil && time.Since(h.prepFullAt) < stallMaxRetry {
		// The last preparation found the disk full (diskfull.go): the leader sends the
		// snapshot again every few ticks, and each try would pull its records again.
		return true
	}
	g.preparing = true
	h.preparing++
	h.prepWG.Add(1)
	go h.prepare(g, sp, m)
	return true
}

func (h *Host) prepare(g *group, sp SnapshotPreparer, m raftpb.Message) {
	defer h.prepWG.Done()
	// A round that took g's Ready before g.preparing was set may still be applying it:
	// wait it out (later rounds skip g) so the preparation never runs beside an Apply.
	h.readyMu.Lock()
	//lint:ignore SA2001 a barrier: the round in flight ends before the preparation starts
	h.readyMu.Unlock()
	err := sp.PrepareSnapshot(h.prepCtx, m.Snapshot.Data)
	h.mu.Lock()
	defer h.mu.Unlock()
	g.preparing = false
	h.preparing--
	if h.closed || h.groups[g.id] != g || g.failed != nil {
		return
	}
	if err != nil && vfs.NoSpace(err) {
		h.prepNoSpaceLocked(g, err)
	} else if err != nil {
		h.cfg.Log.Warn("multiraft: a snapshot from the leader could not be prepared; dropped (the leader sends it again)",
			"group", uint64(g.id), "index", m.Snapshot.Metadata.Index, "err", err)
	} else {
		h.prepFull = nil
		h.wake(g)
		_ = g.rn.Step(m)
	}
	h.markDirty(g)
	h.signal()
}

// BackgroundWork counts the snapshot preparations and encodings under way: the deterministic
// tests wait for none before a round, so a schedule does not depend on how fast a
// goroutine ran.
func (h *Host) BackgroundWork() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.preparing
}
