package multiraft

import (
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// Snapshots encoded off the Ready loop (SnapshotCapturer). A snapshot is taken in the
// Ready loop, between applies, so that it is the state as of one index; encoded there,
// a queue's backlog of 100,000 messages held every group of the node for 0.2–1 s. The
// capture is the Ready loop's part; the encoding runs on a goroutine, and the round after
// it ends stores the snapshot at the captured index and compacts the log behind it, as a
// snapshot taken at once would have been. Until then the group takes no other snapshot,
// and its log keeps the entries since the previous one (a crash meanwhile restarts from
// that one and applies them again). A leader's snapshot restored meanwhile makes the
// encoded one stale: CreateSnapshot refuses it (ErrSnapOutOfDate) and it is dropped.

// snapshotStoreBudget is how long one round may spend storing encoded snapshots before
// it leaves the rest to the rounds after it (at least one is stored per round). Storing
// one on raftstore writes two files atomically (the snapshot, then the state with the
// compaction), four fdatasyncs: 1.1–1.3 ms on this project's test disk
// (BenchmarkSnapshotStore). A burst of encodings ending
// together (every partition of a node checkpointing after the feature level rose:
// bench/cluster/levelrise.sh) stored in one round held every group of the node for a
// second and more, and its peers counted it down; spread out, the rounds between carry
// the other groups' appends, heartbeats and the liveness beat.
const snapshotStoreBudget = 10 * time.Millisecond

// encodedSnap is a snapshot encoded off the Ready loop, for the next round to store.
type encodedSnap struct {
	g     *group
	index uint64
	cs    raftpb.ConfState
	data  []byte
	err   error
}

// startEncoding captures g's state machine's snapshot as of g.applied and encodes it on
// a goroutine of its own. Ready loop only.
func (h *Host) startEncoding(g *group, c SnapshotCapturer) error {
	if h.isClosed() {
		return nil // the node is stopping: no snapshot (see below)
	}
	encode, err := c.CaptureSnapshot()
	if err != nil {
		return fmt.Errorf("multiraft: group %d: capture snapshot: %w", g.id, err)
	}
	h.mu.Lock()
	if h.closed { // since the check above
		// Close is waiting for the encodings under way, or has: one started now would
		// race its Wait and outlive it. The node is stopping; the snapshot is not taken.
		h.mu.Unlock()
		return nil
	}
	g.encoding = true
	index := g.applied
	cs := g.cs
	h.preparing++
	h.prepWG.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.prepWG.Done()
		data, err := encode()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.preparing--
		h.encoded = append(h.encoded, encodedSnap{g: g, index: index, cs: cs, data: data, err: err})
		h.signal()
	}()
	return nil
}

// storeEncoded stores the snapshots encoded since the last round and compacts their
// groups' logs behind them, for at most the store budget (snapshotStoreBudget), the rest
// left for the next round; it reports whether there were any. A group removed, stopped
// or sent a newer snapshot meanwhile drops its own; one the disk has no room for is taken
// again later (the next apply past the interval); any other storage error stops the group
// on this node, as a snapshot taken in apply would. Ready loop only.
func (h *Host) storeEncoded() bool {
	h.mu.Lock()
	done := h.encoded
	h.encoded = nil
	budget := h.storeBudget
	h.mu.Unlock()
	began := time.Now()
	for i, e := range done {
		if i > 0 && time.Since(began) >= budget {
			h.mu.Lock()
			h.encoded = append(done[i:], h.encoded...) // in the order they ended
			h.signal()
			h.mu.Unlock()
			break
		}
		g := e.g
		g.encoding = false
		h.mu.Lock()
		gone := h.closed || h.groups[g.id] != g || g.failed != nil
		h.mu.Unlock()
		if gone || e.index <= g.snapIndex {
			continue
		}
		err := e.err
		if err == nil {
			err = h.storeSnapshot(g, e.index, &e.cs, e.data, true)
		}
		switch {
		case err == nil:
			h.round.stores++
		case vfs.NoSpace(err) && !storageFailed(g.store.Storage):
			h.cfg.Log.Warn("multiraft: no room on the disk for a snapshot; the group goes on and tries again",
				"group", uint64(g.id), "err", err)
		default:
			h.failGroup(g, "its snapshot could not be stored", fmt.Errorf("multiraft: group %d: snapshot at %d: %w", g.id, e.index, err))
		}
	}
	return len(done) > 0
}

// failGroup stops g on this node for good (why, err): no more ticks, messages or Readys.
// Its peers carry on without this replica; a restart of the node tries again.
func (h *Host) failGroup(g *group, why string, err error) {
	h.mu.Lock()
	g.failed = err
	g.failAll(err)
	delete(h.active, g.id)
	h.mu.Unlock()
	h.cfg.Log.Error("multiraft: a group stopped on this node: "+why+"; "+
		"its other replicas carry on, and a restart of this node tries again", "group", uint64(g.id), "err", err)
}
