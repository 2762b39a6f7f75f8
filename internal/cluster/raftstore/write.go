package raftstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Append writes entries to the log, first cutting every entry at or after
// entries[0].Index (a conflicting suffix, as raft.MemoryStorage.Append
// does). Entries below FirstIndex are skipped. The entries are written to
// the OS, and served by Entries, at once; they are durable after the next
// Sync that covers the group. The cut is durable when Append returns.
//
// Entries must be consecutive and start at most at LastIndex+1.
func (g *Group) Append(entries []pb.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.writableLocked(); err != nil {
		return err
	}
	if entries[len(entries)-1].Index < g.first {
		return nil
	}
	if entries[0].Index < g.first {
		entries = entries[g.first-entries[0].Index:]
	}
	at := entries[0].Index
	if at > g.last+1 {
		return fmt.Errorf("raftstore: group %d: append at %d leaves a gap after %d", g.id, at, g.last)
	}
	bufp := encodeBufs.Get().(*[]byte)
	buf := (*bufp)[:0]
	defer func() {
		if cap(buf) <= maxPooledEncode {
			*bufp = buf[:0]
			encodeBufs.Put(bufp)
		}
	}()
	ends := make([]int, len(entries))
	for k, e := range entries {
		if e.Index != at+uint64(k) {
			return fmt.Errorf("raftstore: group %d: entry %d follows %d", g.id, e.Index, at+uint64(k)-1)
		}
		var err error
		if buf, err = appendEntry(buf, e); err != nil {
			return err
		}
		ends[k] = len(buf)
	}
	// Sliced only now: buf may have moved while it grew.
	batches := make([][]byte, len(entries))
	for k, start := 0, 0; k < len(entries); k++ {
		batches[k], start = buf[start:ends[k]:ends[k]], ends[k]
	}
	if at <= g.last {
		if err := g.log.TruncateSuffix(int64(at)); err != nil {
			return g.failLocked(fmt.Errorf("raftstore: group %d: cut at %d: %w", g.id, at, err))
		}
		g.runs.truncate(at)
		g.last = at - 1
		if at <= g.logStart {
			g.logStart = at // the cut emptied the log, which restarts at at
		}
	}
	offs, err := g.log.AppendBuilt(context.Background(), batches...) // appendEntry built them
	if err != nil {
		if errors.Is(err, storage.ErrNeedsRecovery) {
			return g.failLocked(fmt.Errorf("raftstore: group %d: %w", g.id, err))
		}
		return fmt.Errorf("raftstore: group %d: append: %w", g.id, err) // cut back by storage
	}
	if offs[0] != int64(at) {
		return g.failLocked(fmt.Errorf("%w: group %d: entry %d stored at offset %d", ErrDamaged, g.id, at, offs[0]))
	}
	for _, e := range entries {
		g.runs.add(e.Index, e.Term)
	}
	g.last = entries[len(entries)-1].Index
	g.logDirty = true
	return nil
}

// SetHardState stages hs; the next Sync makes it durable, after the log
// (in the node's HardState log, hswal.go).
// Its commit index may not pass LastIndex.
func (g *Group) SetHardState(hs pb.HardState) error {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.writableLocked(); err != nil {
		return err
	}
	if hs.Commit > g.last {
		return fmt.Errorf("raftstore: group %d: commit %d past the last index %d", g.id, hs.Commit, g.last)
	}
	if hs != g.hs {
		g.hs, g.hsDirty = hs, true
	}
	return nil
}

// SetConfState stages the ConfState InitialState returns, durable at the
// next Sync. It must describe the configuration as of the applied index
// the host restarts raft from (raft.Config.Applied): raft applies again
// the conf changes it replays after that index. A host that restarts from
// the snapshot alone never calls it (CreateSnapshot and ApplySnapshot set
// the snapshot's ConfState).
func (g *Group) SetConfState(cs pb.ConfState) error {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.writableLocked(); err != nil {
		return err
	}
	g.cs, g.csDirty = cs, true
	return nil
}

// ApplySnapshot installs a snapshot received from the leader: the snapshot
// file is written, the whole log discarded (it restarts after the
// snapshot) and the state file rewritten, each durable before the next
// step (recover says how every crash in between is resolved). Durable when
// it returns. An older snapshot than the current one is
// raft.ErrSnapOutOfDate.
func (g *Group) ApplySnapshot(snap pb.Snapshot) error {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.writableLocked(); err != nil {
		return err
	}
	S := snap.Metadata.Index
	if S <= g.snap.Index {
		return raft.ErrSnapOutOfDate
	}
	if err := g.writeSnapshotFile(snap); err != nil {
		return err
	}
	g.snap = snap.Metadata
	if err := g.log.Reset(int64(S + 1)); err != nil {
		return g.failLocked(fmt.Errorf("raftstore: group %d: reset log after snapshot %d: %w", g.id, S, err))
	}
	g.runs = termRuns{}
	g.first, g.prevTerm, g.last, g.logStart, g.logDirty = S+1, snap.Metadata.Term, S, S+1, false
	g.cs = snap.Metadata.ConfState
	if g.hs.Commit < S {
		g.hs.Commit, g.hsDirty = S, true
	}
	return g.writeStateLocked(g.stateForFile())
}

// CreateSnapshot records a snapshot of the host's state machine at applied
// index i, durable when it returns, and returns it; it is what Snapshot
// serves from now on. cs, if not nil, is the configuration at i (the
// result of the last ApplyConfChange); nil keeps the previous snapshot's.
// The log is untouched: Compact trims it. i must lie in [FirstIndex-1,
// LastIndex]; at or below the current snapshot it is raft.ErrSnapOutOfDate.
func (g *Group) CreateSnapshot(i uint64, cs *pb.ConfState, data []byte) (pb.Snapshot, error) {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.writableLocked(); err != nil {
		return pb.Snapshot{}, err
	}
	if i <= g.snap.Index {
		return pb.Snapshot{}, raft.ErrSnapOutOfDate
	}
	term, err := g.termLocked(i)
	if err != nil {
		return pb.Snapshot{}, fmt.Errorf("raftstore: group %d: snapshot at %d: %w", g.id, i, err)
	}
	meta := pb.SnapshotMetadata{Index: i, Term: term, ConfState: g.snap.ConfState}
	if cs != nil {
		meta.ConfState = *cs
	}
	snap := pb.Snapshot{Data: data, Metadata: meta}
	if err := g.writeSnapshotFile(snap); err != nil {
		return pb.Snapshot{}, err
	}
	g.snap = meta
	if cs != nil {
		g.cs = *cs
	}
	// The snapshot file is in place, and it is what recover goes by: beside an older
	// state file it restores the same group (the snapshot's configuration, a commit at
	// least its index). So the state file is not written here but by what comes next,
	// the Compact that follows nearly every snapshot (one state-file write for both, two
	// fdatasyncs fewer in the host's Ready loop) or the group's next Sync (csDirty).
	g.csDirty = true
	return snap, nil
}

// Compact makes compactIndex the last index Entries no longer serves, and
// deletes the log's segments that hold only entries below it (whole
// segments: the bytes of the rest stay until the next roll). compactIndex
// may not pass the snapshot, which must cover what the log no longer has.
// Durable when it returns. At or below FirstIndex-1 it is
// raft.ErrCompacted.
func (g *Group) Compact(compactIndex uint64) error {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.writableLocked(); err != nil {
		return err
	}
	switch {
	case compactIndex < g.first:
		return raft.ErrCompacted
	case compactIndex > g.last:
		return fmt.Errorf("raftstore: group %d: compact %d past the last index %d", g.id, compactIndex, g.last)
	case compactIndex > g.snap.Index:
		return fmt.Errorf("raftstore: group %d: compact %d past the snapshot at %d", g.id, compactIndex, g.snap.Index)
	}
	// The state file first: once it says first = compactIndex+1, deleting
	// segments below compactIndex can never lose an entry it promises.
	term, err := g.termLocked(compactIndex)
	if err != nil {
		return err
	}
	prev, prevTerm := g.first, g.prevTerm
	g.first, g.prevTerm = compactIndex+1, term
	// No room is no harm here: first goes back, and the file on disk says the same.
	if err := g.writeStateFull(g.stateForFile(), true); err != nil {
		g.first, g.prevTerm = prev, prevTerm
		return err
	}
	// The state file keeps the term of compactIndex, so its entry may go too.
	if g.store.opts.DeleteInBackground {
		g.deleteLaterLocked(compactIndex + 1)
		return nil
	}
	g.deleteBelowLocked(compactIndex + 1)
	return nil
}

// deleteBelowLocked deletes the log's segments that hold only entries below to and
// moves logStart to the first kept one. Called with mu held, or by the background
// deleter alone. A failure only leaves old entries on disk, below first: recovery
// skips them.
func (g *Group) deleteBelowLocked(to uint64) {
	if _, err := g.log.DeleteBelow(int64(to)); err != nil && !errors.Is(err, storage.ErrClosed) {
		g.store.opts.Logger.Warn("raftstore: compaction left segments behind", "group", g.id, "err", err)
	}
	if p := uint64(g.log.LogStartOffset()); p > g.logStart {
		g.logStart = p
		g.runs.dropBelow(p)
	}
}

// deleteLaterLocked has the group's deleter goroutine delete the segments below to
// (Options.DeleteInBackground), starting it unless it runs. Called with mu held.
func (g *Group) deleteLaterLocked(to uint64) {
	g.delTo = max(g.delTo, to)
	if g.deleting {
		return // the running deleter takes the new target on its next pass
	}
	g.deleting = true
	g.delWG.Add(1)
	go g.deleter()
}

// deleter deletes segments below delTo until no newer target came meanwhile. It
// deletes without mu: storage.Log serializes DeleteBelow with the group's appends,
// cuts and resets, and every segment it removes lies wholly below first, where no
// reader (Entries, Term) goes. Only logStart and the term runs are updated under mu.
func (g *Group) deleter() {
	defer g.delWG.Done()
	var done uint64
	for {
		g.mu.Lock()
		to := g.delTo
		if g.closed || to <= done {
			g.deleting = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		_, err := g.log.DeleteBelow(int64(to))
		if err != nil && !errors.Is(err, storage.ErrClosed) {
			g.store.opts.Logger.Warn("raftstore: compaction left segments behind", "group", g.id, "err", err)
		}
		g.mu.Lock()
		// Read under mu: an ApplySnapshot or a cut that emptied the log moves logStart
		// itself, past anything this pass deleted.
		if p := uint64(g.log.LogStartOffset()); p > g.logStart {
			g.logStart = p
			g.runs.dropBelow(p)
		}
		g.mu.Unlock()
		done = to
	}
}

// stateForFile is the state file's next contents. Its HardState is the
// durable one, with its sequence number: the staged one becomes durable
// only through Sync, after its entries, and a HardState the HardState log
// holds with a higher number still wins at Open. Called with pmu and mu
// held.
func (g *Group) stateForFile() stateRec {
	hs := g.disk.hs
	hs.Commit = max(hs.Commit, g.first-1, g.snap.Index) // see recover
	return stateRec{hs: hs, hsSeq: g.disk.hsSeq, cs: g.cs, first: g.first, prevTerm: g.prevTerm, snapIndex: g.snap.Index}
}

// writeStateLocked replaces the state file with r. Called with pmu and mu
// held. A failure leaves the old or the new file (atomic replace) and the
// group failed: which one is on disk is known again only after recovery.
func (g *Group) writeStateLocked(r stateRec) error { return g.writeStateFull(r, false) }

// writeStateFull is writeStateLocked that, with keepOnFull, leaves the group
// writable when the disk had no room: the new file was not renamed into place
// (a rename either happens or fails whole, and ENOSPC comes from writing or
// syncing the temporary file, or from a rename that did not happen), so the
// old one is what is on disk, and a later write of the state replaces it.
// For callers whose in-memory state is then still one recovery would give.
func (g *Group) writeStateFull(r stateRec, keepOnFull bool) error {
	b, err := encodeState(r)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(g.fs, g.dir, stateFile, b); err != nil {
		err = fmt.Errorf("raftstore: group %d: write state: %w", g.id, err)
		if keepOnFull && vfs.NoSpace(err) {
			return err
		}
		return g.failLocked(err)
	}
	g.disk = r
	g.csDirty = false
	return nil
}

func (g *Group) writeSnapshotFile(s pb.Snapshot) error {
	b, err := encodeSnapshot(s)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(g.fs, g.dir, snapshotFile, b); err != nil {
		err = fmt.Errorf("raftstore: group %d: write snapshot: %w", g.id, err)
		if vfs.NoSpace(err) {
			// The old file is in place (writeStateFull says why), and both callers
			// write it first, before anything else changes: nothing to fail.
			return err
		}
		return g.failLocked(err)
	}
	return nil
}

// writableLocked refuses writes to a closed or failed group.
func (g *Group) writableLocked() error {
	if g.closed {
		return ErrClosed
	}
	return g.failed
}

func (g *Group) failLocked(err error) error {
	if g.failed == nil {
		g.failed = err
	}
	return err
}
