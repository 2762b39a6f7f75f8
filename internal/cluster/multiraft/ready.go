package multiraft

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// readyWork is one group's Ready taken in a round.
type readyWork struct {
	g      *group
	rd     raft.Ready
	done   int  // of rd.CommittedEntries, how many were applied before the round's sync
	leader bool // the group's node led it when the Ready was taken
	// snapStored and stored: persist wrote the Ready's snapshot, and all of it; restored:
	// the state machine has the snapshot. A round retried after a full disk (diskfull.go)
	// writes and applies only what is left.
	snapStored, stored, restored bool
}

// stableCommitted is the head of rd's committed entries that this node's storage already
// holds durably: those below the Ready's own (unsynced) entries. Every round syncs what
// it wrote before the next takes a Ready, so raft's unstable log is exactly rd.Entries.
// None when the Ready carries a snapshot: it replaces the log and is restored first.
func stableCommitted(rd raft.Ready) []raftpb.Entry {
	if !raft.IsEmptySnap(rd.Snapshot) {
		return nil
	}
	ents := rd.CommittedEntries
	if len(rd.Entries) > 0 {
		first := rd.Entries[0].Index
		n := 0
		for n < len(ents) && ents[n].Index < first {
			n++
		}
		ents = ents[:n]
	}
	return ents
}

// applyOrStop applies a snapshot and committed entries of g, or stops the group on this
// node if its state machine refuses them: no more ticks, messages or Readys (the state
// machine cannot skip the entry it refused). Its peers carry on without this replica. It
// returns how many of ents are done (all of them, but for a full disk) and the full disk
// that stopped it at the next (NoRoomError: applied again once there is room).
func (h *Host) applyOrStop(g *group, snap raftpb.Snapshot, ents []raftpb.Entry) (int, *fullError) {
	if g.failed != nil || (raft.IsEmptySnap(snap) && len(ents) == 0) {
		return len(ents), nil
	}
	n, err := h.apply(g, snap, ents)
	var nr *NoRoomError
	if errors.As(err, &nr) {
		return n, &fullError{group: g.id, op: "apply", err: err}
	}
	if err != nil {
		h.failGroup(g, "its state machine refused an entry", err)
	}
	return len(ents), nil
}

// ProcessReady runs one round of the Ready loop: it takes the Ready of every group with
// work, sends the messages that need not wait (appends, heartbeats, vote requests: one
// batch per peer node), writes every Ready to storage, syncs the engine once for all of
// them, sends the answers that had to wait for the sync, applies the committed entries and
// advances the groups.
// It reports whether there was anything to do. Rounds are serialised; Run calls it, and
// deterministic tests call it themselves.
func (h *Host) ProcessReady() (bool, error) {
	h.readyMu.Lock()
	defer h.readyMu.Unlock()
	if err := h.storageError(); err != nil {
		return false, err
	}
	h.round = roundTrace{}
	// A round the disk had no room for is finished first, from where it stopped: before
	// its sync, or in its apply (diskfull.go). Nothing else moves here until it is.
	work, persisted := h.stalledWork()
	if work == nil {
		began := time.Now()
		stored := h.storeEncoded() // encode.go
		h.round.store = time.Since(began)
		var out []Message
		var beat bool
		work, out, beat = h.takeReadys()
		if len(work) == 0 && len(out) == 0 && !beat {
			return stored, nil
		}
		h.send(work, out, beat, false)
		began = time.Now()
		h.applyEarly(work)
		h.round.apply = time.Since(began)
	}
	h.round.readys = len(work)
	if !persisted {
		began := time.Now()
		err := h.persist(work)
		h.round.persist = time.Since(began)
		if h.stallOnFull(work, false, err) {
			return false, nil // Run retries the round
		}
		if err != nil {
			// The groups took Readys they will never advance: raft would panic on the next
			// one. The host is done; the node restarts from what its storage holds. (The
			// waiting proposals' outcome is unknown: their appends may have left already.)
			h.mu.Lock()
			h.storageErr = err
			for _, g := range h.groups {
				g.failAll(err)
			}
			h.mu.Unlock()
			return true, err
		}
		h.send(work, nil, false, true)
	}
	began := time.Now()
	for i := range work {
		h.round.applied += len(work[i].rd.CommittedEntries)
		if full := h.applyRest(&work[i]); full != nil {
			h.stallOnFull(work, true, full)
			return false, nil
		}
	}
	h.round.apply += time.Since(began)
	h.endStall()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range work {
		if w.g.failed != nil {
			continue // never advanced: it stops taking Readys here
		}
		if w.g.blank && (!raft.IsEmptySnap(w.rd.Snapshot) || len(w.rd.Entries) > 0) {
			w.g.blank = false // a leader's log is on disk now: it may vote
		}
		h.failDeposed(w.g)
		w.g.rn.Advance(w.rd)
		if w.g.rn.HasReady() {
			h.markDirty(w.g)
		}
	}
	h.stats.Rounds++
	return true, nil
}

// takeReadys takes, under the lock, the Ready of every dirty group (in group order, so a
// round's batches are the same on every run), the host's own messages, and whether the
// liveness beat is due.
func (h *Host) takeReadys() (work []readyWork, out []Message, beat bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]GroupID, 0, len(h.dirty))
	for id := range h.dirty {
		ids = append(ids, id)
	}
	clear(h.dirty)
	slices.Sort(ids)
	for _, id := range ids {
		g := h.groups[id]
		if g == nil || g.failed != nil || g.preparing {
			continue // a preparing group is marked dirty again when it is done
		}
		if !g.rn.HasReady() {
			h.dropUnlogged(g)
			continue
		}
		rd := g.rn.Ready()
		h.track(g, rd.Entries)
		h.dropUnlogged(g)
		if len(rd.Entries) > 0 || len(rd.CommittedEntries) > 0 {
			g.idle = 0
		}
		work = append(work, readyWork{g: g, rd: rd, leader: g.rn.BasicStatus().RaftState == raft.StateLeader})
	}
	out, h.outbox = h.outbox, nil
	slices.SortStableFunc(out, func(a, b Message) int { return cmp.Compare(a.Group, b.Group) })
	if beat = h.beatDue(); beat {
		h.beatAt = h.now
	}
	h.stats.Readys += uint64(len(work))
	return work, out, beat
}

// track notes the log index of this node's proposals as they enter its log.
func (h *Host) track(g *group, ents []raftpb.Entry) {
	for _, e := range ents {
		node, seq, ok := entryHeader(e)
		if !ok || node != h.cfg.Node {
			continue
		}
		if p := g.pending[seq]; p != nil {
			if old := g.byIndex[p.index]; p.index != 0 && old == p {
				delete(g.byIndex, p.index)
			}
			p.index, p.term = e.Index, e.Term
			g.byIndex[e.Index] = p
		}
	}
}

// dropUnlogged gives up on the proposals made since the group's last Ready that this
// Ready did not carry. If this node still leads in the term it was asked in, raft itself
// replaced the entry (a configuration change while another is pending becomes an empty
// entry): dropped. Otherwise a newer leader's append overwrote it before this node logged
// it, and its outcome is unknown: the appends raft made when it was proposed may have
// reached a follower of the old term, whose copy a later leader could yet commit.
func (h *Host) dropUnlogged(g *group) {
	if len(g.fresh) == 0 {
		return
	}
	bs := g.rn.BasicStatus()
	for _, p := range g.fresh {
		if p.index != 0 || g.pending[p.seq] != p {
			continue
		}
		delete(g.pending, p.seq)
		if bs.RaftState == raft.StateLeader && bs.Term == p.asked {
			p.finish(0, ErrProposalDropped)
		} else {
			p.finish(0, ErrOutcomeUnknown)
		}
	}
	g.fresh = g.fresh[:0]
}

// failDeposed fails, as outcome unknown, the proposals g's node made as a leader it no
// longer is (it stepped down, or its term moved on): called once the round applied what
// was committed, so whatever this node knows committed has been answered. What is left
// may still be committed by a later leader that holds the entry, or never: waiting would
// last until this node's log reached the entry's index again, which on an idle group may
// be never. The proposer learns at once and retries (a Kafka idempotent producer's retry
// is deduplicated).
func (h *Host) failDeposed(g *group) {
	if len(g.pending) == 0 {
		return
	}
	bs := g.rn.BasicStatus()
	for seq, p := range g.pending {
		if bs.RaftState == raft.StateLeader && bs.Term == p.asked {
			continue
		}
		delete(g.pending, seq)
		if p.index != 0 && g.byIndex[p.index] == p {
			delete(g.byIndex, p.index)
		}
		p.finish(0, ErrOutcomeUnknown)
	}
}

func entryHeader(e raftpb.Entry) (NodeID, uint64, bool) {
	b := e.Data
	if e.Type == raftpb.EntryConfChangeV2 {
		var cc raftpb.ConfChangeV2
		if err := cc.Unmarshal(e.Data); err != nil {
			return 0, 0, false
		}
		b = cc.Context
	} else if e.Type != raftpb.EntryNormal {
		return 0, 0, false
	}
	node, seq, _, ok := decodeProposal(b)
	return node, seq, ok
}

// applyEarly applies, on a leader, entries it had already synced and that are committed
// (and answers their proposers) now rather than after this round's sync of newer entries:
// under load every round has new entries, and a commit would otherwise wait a whole fsync
// that has nothing to do with it. A follower applies after its sync as before: its answer
// to the leader, sent after the sync, is what the commit waits for, and an apply ahead of
// the sync would delay it.
func (h *Host) applyEarly(work []readyWork) {
	for i := range work {
		if !work[i].leader {
			continue
		}
		// A full disk stops this early; the rest is applied after the sync (applyRest).
		work[i].done, _ = h.applyOrStop(work[i].g, raftpb.Snapshot{}, stableCommitted(work[i].rd))
	}
}

// applyRest applies what is left of w's Ready after the sync: its snapshot, once, and the
// committed entries not applied yet. A full disk stops it where it was (w.done) and is
// returned; anything else the state machine refuses stops the group (applyOrStop).
func (h *Host) applyRest(w *readyWork) *fullError {
	var snap raftpb.Snapshot
	if !w.restored {
		snap, w.restored = w.rd.Snapshot, true
	}
	n, full := h.applyOrStop(w.g, snap, w.rd.CommittedEntries[w.done:])
	w.done += n
	return full
}

// persist writes every Ready's snapshot, entries and HardState, then syncs once. An append
// the disk had no room for is a *fullError, after which persist may be called again with
// the same work (diskfull.go); any other error is final.
func (h *Host) persist(work []readyWork) error {
	sync := false
	written := make([]Storage, 0, len(work))
	for i := range work {
		w := &work[i]
		rd, st := w.rd, w.g.store
		if !raft.IsEmptySnap(rd.Snapshot) {
			if !w.snapStored {
				if err := st.ApplySnapshot(rd.Snapshot); err != nil {
					if full := asFull(w.g.id, "apply snapshot", st, err); full != nil {
						return full // its first write, the snapshot file: nothing changed
					}
					return fmt.Errorf("multiraft: group %d: apply snapshot: %w", w.g.id, err)
				}
				w.snapStored = true
			}
			sync = true
		}
		if len(rd.Entries) > 0 && !w.stored {
			if err := st.Append(rd.Entries); err != nil {
				if full := asFull(w.g.id, "append", st, err); full != nil {
					return full
				}
				return fmt.Errorf("multiraft: group %d: append: %w", w.g.id, err)
			}
		}
		if !raft.IsEmptyHardState(rd.HardState) && !w.stored {
			if err := st.SetHardState(rd.HardState); err != nil {
				return fmt.Errorf("multiraft: group %d: hard state: %w", w.g.id, err)
			}
		}
		w.stored = true
		sync = sync || rd.MustSync
		if !raft.IsEmptySnap(rd.Snapshot) || len(rd.Entries) > 0 || !raft.IsEmptyHardState(rd.HardState) {
			written = append(written, st.Storage) // the engine's own, as it handed it out
		}
	}
	if !sync {
		return nil
	}
	if err := h.cfg.Engine.Sync(written); err != nil {
		if full := syncFull(written, err); full != nil {
			return full
		}
		return fmt.Errorf("multiraft: sync: %w", err)
	}
	h.mu.Lock()
	h.stats.Syncs++
	h.mu.Unlock()
	return nil
}

// afterSync reports whether a message speaks for this node's persisted state (the answer
// to an append or a vote) and so must wait for the round's sync. Everything else (appends,
// heartbeats, vote requests, snapshots) leaves before the sync: a leader counts its own
// copy of an entry only once synced (raft steps its own append response on Advance), so
// replicating while it syncs is safe, and a commit costs one sync on the leader and one on
// a follower in parallel instead of one after the other (Raft thesis §10.2.1). These are
// the types raft itself holds back until the append (its msgsAfterAppend).
func afterSync(t raftpb.MessageType) bool {
	return t == raftpb.MsgAppResp || t == raftpb.MsgVoteResp || t == raftpb.MsgPreVoteResp
}

// send batches the round's messages that may leave now (late: those that had to wait for
// the sync) per destination node, and beats the peers that get nothing else when the
// liveness beat is due.
func (h *Host) send(work []readyWork, out []Message, beat, late bool) {
	byNode := map[NodeID]*Batch{}
	var order []NodeID
	add := func(m Message) {
		to := NodeID(m.Msg.To)
		b := byNode[to]
		if b == nil {
			b = &Batch{From: h.cfg.Node, To: to}
			byNode[to] = b
			order = append(order, to)
		}
		b.Messages = append(b.Messages, m)
	}
	for _, w := range work {
		for _, m := range w.rd.Messages {
			if afterSync(m.Type) == late {
				add(Message{Group: w.g.id, Msg: m})
			}
		}
	}
	for _, m := range out {
		add(m)
	}
	if beat {
		for _, p := range h.peerIDs() {
			if byNode[p] == nil {
				byNode[p] = &Batch{From: h.cfg.Node, To: p}
				order = append(order, p)
			}
		}
	}
	slices.Sort(order)
	msgs := 0
	for _, to := range order {
		msgs += len(byNode[to].Messages)
		h.cfg.Transport.Send(*byNode[to])
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.Batches += uint64(len(order))
	h.stats.Messages += uint64(msgs)
	// A snapshot handed to the transport is reported sent: the follower's progress goes back
	// to probing, so a lost (or refused, stale) snapshot is simply sent again, the latest one.
	for _, w := range work {
		for _, m := range w.rd.Messages {
			if m.Type == raftpb.MsgSnap && !late {
				w.g.rn.ReportSnapshot(m.To, raft.SnapshotFinish)
				h.stats.SnapsSent++
			}
		}
	}
}

func (h *Host) storageError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.storageErr
}
