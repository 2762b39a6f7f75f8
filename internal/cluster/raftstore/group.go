package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ErrCommitPastLog: a group's durable HardState commits entries its
// durable log does not hold. Sync's order makes this impossible; meeting it
// at Open means the disk lost synced data, and the replica must be rebuilt
// from its peers rather than vote or serve with a log missing what it
// acknowledged.
var ErrCommitPastLog = errors.New("raftstore: HardState commit past the durable log")

// Group is the durable Raft state of one group on this node. It implements
// raft.Storage (read.go) and the writes RawNode's Ready asks for (write.go);
// Store.Sync makes them durable.
//
// The raft.Storage methods may run concurrently with each other and with
// the writes. The writes of one group (Append, SetHardState, SetConfState,
// ApplySnapshot, CreateSnapshot, Compact, and its part of a Sync) are
// serialized by the group, in the order they are called.
type Group struct {
	store *Store
	id    uint64
	dir   string
	fs    vfs.FS
	log   *storage.Log

	// pmu serializes the writes (persistence) and owns disk below.
	pmu  sync.Mutex
	disk stateRec // what the state file holds now

	// mu guards the fields below: readers take it shared.
	mu       sync.RWMutex
	first    uint64 // first index served by Entries
	prevTerm uint64 // term of entry first-1 (raft's "dummy entry"), kept past compaction
	last     uint64 // last index in the log (first-1 when empty)
	logStart uint64 // the log's first offset: runs cover [logStart, last]
	runs     termRuns
	snap     pb.SnapshotMetadata // of the durable snapshot; zero if none
	hs       pb.HardState        // the latest SetHardState (durable after Sync)
	cs       pb.ConfState
	logDirty bool  // entries appended since the last log sync
	hsDirty  bool  // hs changed since the last Sync took it
	csDirty  bool  // the state file's cs, first or snapshot index are stale
	failed   error // sticky: the group needs Close and Open (recovery)
	closed   bool
	delTo    uint64 // DeleteInBackground: delete the segments below this
	deleting bool   // the deleter goroutine runs

	delWG sync.WaitGroup // the deleter, which Close waits for
}

// ID is the group's id.
func (g *Group) ID() uint64 { return g.id }

// Err returns the error that made the group refuse writes, or nil.
func (g *Group) Err() error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.failed
}

// Close closes the group's log. Writes not made durable by Sync may or may
// not survive.
func (g *Group) Close() error {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	g.closed = true
	g.mu.Unlock()
	g.delWG.Wait() // it sees closed before its next pass
	g.store.forget(g)
	return g.log.Close()
}

// openGroup opens or creates the group in dir and reconciles its three
// parts after whatever crash ended the last run (see recover).
func openGroup(s *Store, id uint64, dir string) (*Group, error) {
	g := &Group{store: s, id: id, dir: dir, fs: s.opts.FS}
	if _, err := g.fs.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := g.create(); err != nil {
			return nil, fmt.Errorf("raftstore: group %d: %w", id, err)
		}
	}
	st, err := readOptional(g.fs, filepath.Join(dir, stateFile), decodeState)
	if err != nil {
		return nil, fmt.Errorf("raftstore: group %d: %w", id, err)
	}
	snap, err := readOptional(g.fs, filepath.Join(dir, snapshotFile), decodeSnapshot)
	if err != nil {
		return nil, fmt.Errorf("raftstore: group %d: %w", id, err)
	}
	o := s.opts
	g.log, err = storage.Open(storage.Options{
		FS: g.fs, Dir: filepath.Join(dir, "log"), SegmentBytes: o.SegmentBytes,
		PreallocateBytes: o.PreallocateBytes, MaxBatchBytes: o.MaxEntryBytes + 1024,
		Files: o.Files, Sync: storage.SyncPolicy{Mode: storage.SyncNever}, Now: o.Now, Logger: o.Logger, Observer: o.Observer,
	})
	if err != nil {
		return nil, fmt.Errorf("raftstore: group %d: %w", id, err)
	}
	if err := g.recover(st, snap.Metadata); err != nil {
		g.log.Close()
		return nil, fmt.Errorf("raftstore: group %d: %w", id, err)
	}
	return g, nil
}

// create makes the directory of a new group, whole or not at all: built
// under a temporary name, then renamed into place. The HardState log may
// still hold a record of a removed group of the same id (RemoveGroup does
// not rewrite the shared log), so the new state file is numbered above
// every record: that stale HardState never applies to the new replica,
// even if the group crashes before its first Sync.
func (g *Group) create() error {
	tmp := g.dir + newSuffix
	if err := vfs.RemoveAll(g.fs, tmp); err != nil {
		return err
	}
	if err := vfs.MkdirAllDurable(g.fs, tmp); err != nil {
		return err
	}
	b, err := encodeState(stateRec{hsSeq: g.store.nextSeq()})
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(g.fs, tmp, stateFile, b); err != nil {
		return err
	}
	if err := g.fs.Rename(tmp, g.dir); err != nil {
		return err
	}
	return g.fs.SyncDir(filepath.Dir(g.dir))
}

// recover makes the log agree with the snapshot and derives the in-memory
// state. The writes are ordered so that every crash leaves one of these:
//
//   - the log holds the snapshot's index with its term, or starts right
//     after it: consistent, kept;
//   - otherwise the snapshot was written and the crash came before the log
//     was reset (ApplySnapshot), or the log lost entries the snapshot
//     covers: the snapshot wins and the log restarts after it. Entries
//     above a snapshot are only ever kept when the log matches it.
func (g *Group) recover(st stateRec, snap pb.SnapshotMetadata) error {
	S := snap.Index
	start, next := uint64(g.log.LogStartOffset()), uint64(g.log.HighWatermark())
	consistent := start == S+1
	if !consistent && start <= S && S < next {
		t, err := g.headerTerm(S)
		if err != nil {
			return err
		}
		consistent = t == snap.Term
	}
	if !consistent {
		if err := g.log.Reset(int64(S + 1)); err != nil {
			return err
		}
		start, next = S+1, S+1
	}
	g.last, g.logStart, g.snap = next-1, start, snap
	if next > start {
		if err := g.runs.build(start, next-1, g.headerTerm); err != nil {
			return err
		}
	}
	g.first = max(st.first, start)
	switch {
	case g.first == st.first:
		g.prevTerm = st.prevTerm
	case g.first-1 == S:
		g.prevTerm = snap.Term
	case g.first-1 >= start:
		g.prevTerm = g.runs.at(g.first - 1)
	default: // the term before first is unknown: compact to the snapshot
		g.first, g.prevTerm = S+1, snap.Term
	}
	first := g.first
	g.store.seen(st.hsSeq)
	if r, ok := g.store.wal.newest(g.id); ok && r.seq > st.hsSeq {
		st.hs, st.hsSeq = r.hs, r.seq // newer than the state file's
	}
	g.hs, g.cs = st.hs, st.cs
	if st.snapIndex < S {
		g.cs = snap.ConfState // the state file predates the snapshot
	}
	// A snapshot's entries are committed, and raft refuses to start with
	// Applied (the snapshot's index, after a restart) past the commit: a
	// crash between a snapshot and the next HardState leaves it below.
	g.hs.Commit = max(g.hs.Commit, first-1, S)
	if g.hs.Commit > g.last {
		return fmt.Errorf("%w: commit %d, last index %d", ErrCommitPastLog, g.hs.Commit, g.last)
	}
	g.disk = st
	g.hsDirty = g.hs != st.hs
	g.csDirty = st.snapIndex < S || st.first != first || st.prevTerm != g.prevTerm
	return nil
}

// headerTerm reads the term of entry i from its batch header.
func (g *Group) headerTerm(i uint64) (uint64, error) {
	h, err := g.log.HeaderAt(int64(i))
	if err != nil {
		return 0, fmt.Errorf("%w: entry %d: %v", ErrDamaged, i, err)
	}
	if h.BaseOffset != int64(i) || h.LastOffsetDelta != 0 || h.PartitionLeaderEpoch < 0 {
		return 0, fmt.Errorf("%w: entry %d: batch at %d spans %d offsets, epoch %d", ErrDamaged, i, h.BaseOffset, h.LastOffsetDelta+1, h.PartitionLeaderEpoch)
	}
	return uint64(h.PartitionLeaderEpoch), nil
}

// readOptional decodes the file at path; a missing file is the zero value.
func readOptional[T any](fsys vfs.FS, path string, decode func([]byte) (T, error)) (T, error) {
	var zero T
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return zero, nil
	}
	if err != nil {
		return zero, err
	}
	v, err := decode(b)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
