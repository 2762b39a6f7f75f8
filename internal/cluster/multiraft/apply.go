package multiraft

import (
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// ErrOutcomeUnknown: this node lost sight of its proposal's entry before seeing it applied
// (it lost the leadership it proposed under, a snapshot from the leader replaced its log
// past the entry, or a newer leader overwrote the entry before this node logged it). It
// may or may not be committed; only reading the state can tell.
var ErrOutcomeUnknown = errors.New("multiraft: proposal outcome unknown (leadership lost, or the entry replaced, before it was seen applied)")

// apply hands a Ready's snapshot and committed entries (all of them, or a part: ready.go)
// to the state machine, applies
// configuration changes to raft, resolves this node's proposals and snapshots the group
// when its log has grown enough. It returns how many of ents it applied: all of them, or,
// when the state machine found no room for one (a *NoRoomError), those before it.
func (h *Host) apply(g *group, snap raftpb.Snapshot, ents []raftpb.Entry) (int, error) {
	if !raft.IsEmptySnap(snap) {
		if err := h.restore(g, snap); err != nil {
			return 0, err
		}
	}
	var run []Entry
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		err := g.sm.Apply(run)
		run = nil
		return err
	}
	// A run of normal entries goes to the state machine before each configuration change
	// and at the end. One it found no room for ends the apply at that entry.
	done := len(ents)
	var full *NoRoomError
	applyRun := func() error {
		sent := run
		err := flush()
		if err != nil {
			if full, done = noRoomAt(err, sent, ents); full != nil {
				return nil
			}
		}
		return err
	}
	for _, e := range ents {
		if e.Type == raftpb.EntryNormal {
			if _, _, data, ok := decodeProposal(e.Data); ok {
				run = append(run, Entry{Index: e.Index, Term: e.Term, Data: data})
			}
			continue
		}
		if e.Type != raftpb.EntryConfChange && e.Type != raftpb.EntryConfChangeV2 {
			continue
		}
		if err := applyRun(); err != nil {
			return 0, err
		}
		if full != nil {
			break
		}
		if err := h.applyConfChange(g, e); err != nil {
			return 0, err
		}
	}
	if full == nil {
		if err := applyRun(); err != nil {
			return 0, err
		}
	}
	ents = ents[:done]
	h.mu.Lock()
	h.resolve(g, ents)
	h.mu.Unlock()
	confChanged := false
	for _, e := range ents {
		confChanged = confChanged || e.Type != raftpb.EntryNormal
	}
	if n := len(ents); n > 0 {
		g.applied = ents[n-1].Index
		g.store.trim(g.applied)
	}
	if full != nil {
		return done, full
	}
	if err := h.maybeSnapshot(g, confChanged); err != nil {
		if !vfs.NoSpace(err) || storageFailed(g.store.Storage) {
			return done, err
		}
		// Not taken for lack of room: the next apply tries again. Nothing is lost, the
		// log is only compacted later.
		h.cfg.Log.Warn("multiraft: no room on the disk for a snapshot; the group goes on and tries again",
			"group", uint64(g.id), "err", err)
	}
	return done, nil
}

// noRoomAt is err as the *NoRoomError of an entry of run, with how many of ents come
// before that entry; nil when err is anything else (or names no entry of run).
func noRoomAt(err error, run []Entry, ents []raftpb.Entry) (*NoRoomError, int) {
	var nr *NoRoomError
	if !errors.As(err, &nr) || len(run) == 0 || nr.Index < run[0].Index || nr.Index > run[len(run)-1].Index {
		return nil, 0
	}
	return nr, int(nr.Index - ents[0].Index)
}

func (h *Host) restore(g *group, snap raftpb.Snapshot) error {
	if err := g.sm.Restore(snap.Data); err != nil {
		return fmt.Errorf("multiraft: group %d: restore snapshot at %d: %w", g.id, snap.Metadata.Index, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.SnapsTaken++
	g.cs = snap.Metadata.ConfState
	g.removed = !isMember(g.cs, h.cfg.Node)
	g.applied, g.snapIndex = snap.Metadata.Index, snap.Metadata.Index
	for i, p := range g.byIndex {
		if i <= snap.Metadata.Index {
			delete(g.byIndex, i)
			delete(g.pending, p.seq)
			p.finish(0, ErrOutcomeUnknown)
		}
	}
	return nil
}

func (h *Host) applyConfChange(g *group, e raftpb.Entry) error {
	var cc raftpb.ConfChangeI
	if e.Type == raftpb.EntryConfChange {
		var c raftpb.ConfChange
		if err := c.Unmarshal(e.Data); err != nil {
			return fmt.Errorf("multiraft: group %d: entry %d: %w", g.id, e.Index, err)
		}
		cc = c
	} else {
		var c raftpb.ConfChangeV2
		if err := c.Unmarshal(e.Data); err != nil {
			return fmt.Errorf("multiraft: group %d: entry %d: %w", g.id, e.Index, err)
		}
		cc = c
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g.cs = *g.rn.ApplyConfChange(cc)
	if g.removed = !isMember(g.cs, h.cfg.Node); g.removed {
		// Out of the group: nothing left to tick for. Messages still wake it, and raft
		// answers them as a non-member would.
		g.quiesced = true
		delete(h.active, g.id)
	}
	return nil
}

// resolve finishes this node's proposals among the applied entries, and fails a proposal
// whose log position another entry took.
func (h *Host) resolve(g *group, ents []raftpb.Entry) {
	for _, e := range ents {
		// Ours if the header names this host's proposal and the entry sits where the
		// proposal entered this node's log: same index and term is the same entry.
		if node, seq, ok := entryHeader(e); ok && node == h.cfg.Node {
			if p := g.pending[seq]; p != nil && p.index == e.Index && p.term == e.Term {
				delete(g.pending, seq)
				if g.byIndex[p.index] == p {
					delete(g.byIndex, p.index)
				}
				p.finish(e.Index, nil)
				continue
			}
		}
		if p := g.byIndex[e.Index]; p != nil {
			delete(g.byIndex, e.Index)
			delete(g.pending, p.seq)
			p.finish(0, ErrProposalDropped)
		}
	}
}

// maybeSnapshot snapshots the state machine once SnapshotEntries entries were applied since
// the last snapshot, and compacts the log to half that behind it, so a follower a little
// behind still catches up from the log rather than a snapshot — never past the limit of a
// state machine that is a CompactionLimiter. A configuration change
// forces a snapshot (without compaction): raft refuses a snapshot whose configuration does
// not name the receiver, so a node just added must be sent one taken after its addition.
func (h *Host) maybeSnapshot(g *group, confChanged bool) error {
	every := h.cfg.SnapshotEntries
	if g.applied <= g.snapIndex || (!confChanged && g.applied < g.snapIndex+every && !wantsSnapshot(g.sm)) {
		return nil
	}
	if !confChanged && g.encoding {
		return nil // one is on its way (encode.go)
	}
	if p, ok := g.sm.(SnapshotPacer); ok && !confChanged && !p.SnapshotDue() {
		return nil
	}
	if c, ok := g.sm.(SnapshotCapturer); ok && !confChanged {
		return h.startEncoding(g, c)
	}
	data, err := g.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("multiraft: group %d: snapshot: %w", g.id, err)
	}
	h.mu.Lock()
	cs := g.cs
	h.mu.Unlock()
	return h.storeSnapshot(g, g.applied, &cs, data, !confChanged)
}

// storeSnapshot stores data as g's snapshot at index (cs: the configuration there) and,
// if compact, compacts the log behind it (see maybeSnapshot). A snapshot at or below the
// stored one is dropped (raft.ErrSnapOutOfDate: a newer one came from the leader).
func (h *Host) storeSnapshot(g *group, index uint64, cs *raftpb.ConfState, data []byte, compact bool) error {
	_, err := g.store.CreateSnapshot(index, cs, data)
	if err != nil && err != raft.ErrSnapOutOfDate {
		return fmt.Errorf("multiraft: group %d: create snapshot: %w", g.id, err)
	}
	if err == nil {
		h.mu.Lock()
		h.stats.SnapsCreated++
		h.stats.SnapBytesCreated += uint64(len(data))
		h.mu.Unlock()
	}
	g.snapIndex = index
	if !compact {
		return nil
	}
	every := h.cfg.SnapshotEntries
	var to uint64
	if keep := every / 2; index > keep+1 {
		to = index - keep
	}
	if p, ok := g.sm.(SnapshotWanter); ok {
		to = min(p.CompactTo(index), index)
	}
	if l, ok := g.sm.(CompactionLimiter); ok {
		to = min(to, l.CompactLimit())
	}
	if to <= 1 { // nothing to discard: index 1 is the bootstrap snapshot
		return nil
	}
	if err := g.store.Compact(to); err != nil && err != raft.ErrCompacted {
		return fmt.Errorf("multiraft: group %d: compact: %w", g.id, err)
	}
	return nil
}

func wantsSnapshot(sm StateMachine) bool {
	w, ok := sm.(SnapshotWanter)
	return ok && w.WantSnapshot()
}

// CompactionLimiter is an optional interface of a StateMachine whose snapshot does not hold
// its whole state: a replicated partition's snapshot is a checkpoint of a local log (a high
// watermark), not its records, so a follower sent that snapshot instead of the entries
// behind it would silently lack them. The host never compacts a group's log past
// CompactLimit (0: never compact). Snapshots are still taken every SnapshotEntries: they
// bound what a restart re-applies. A state machine without it is compacted as usual.
type CompactionLimiter interface {
	// CompactLimit is the highest index the host may compact the log to: every entry
	// after it stays in the log, to be sent to followers as entries. Called from the
	// Ready loop, after Snapshot.
	CompactLimit() uint64
}
