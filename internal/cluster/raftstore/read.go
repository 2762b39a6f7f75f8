package raftstore

import (
	"fmt"
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

var _ raft.Storage = (*Group)(nil)

// readChunk bounds one storage read while Entries fills a large maxSize.
const readChunk = 1 << 20

// InitialState implements raft.Storage: the HardState and ConfState as of
// the latest writes (after Open: as durable).
func (g *Group) InitialState() (pb.HardState, pb.ConfState, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.hs, g.cs, nil
}

// FirstIndex implements raft.Storage.
func (g *Group) FirstIndex() (uint64, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.first, nil
}

// LastIndex implements raft.Storage.
func (g *Group) LastIndex() (uint64, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.last, nil
}

// Term implements raft.Storage, from the in-memory term runs.
func (g *Group) Term(i uint64) (uint64, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.termLocked(i)
}

func (g *Group) termLocked(i uint64) (uint64, error) {
	switch {
	case i < g.first-1:
		return 0, raft.ErrCompacted
	case i > g.last:
		return 0, raft.ErrUnavailable
	case i == g.first-1:
		return g.prevTerm, nil
	case i >= g.logStart && len(g.runs.runs) > 0:
		return g.runs.at(i), nil
	}
	return 0, fmt.Errorf("%w: no term for index %d (log starts at %d, snapshot %d)", ErrDamaged, i, g.logStart, g.snap.Index)
}

// Entries implements raft.Storage: entries [lo, hi) read from the log, at
// least one, then as many as fit in maxSize (measured as raft does, by
// Entry.Size). The slice and the entries' data are freshly allocated.
func (g *Group) Entries(lo, hi, maxSize uint64) ([]pb.Entry, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	switch {
	case lo < g.first:
		return nil, raft.ErrCompacted
	case hi > g.last+1:
		return nil, fmt.Errorf("%w: entries [%d, %d) past the last index %d", raft.ErrUnavailable, lo, hi, g.last)
	case g.last < g.first:
		return nil, raft.ErrUnavailable
	}
	var out []pb.Entry
	size := uint64(0)
	chunk := int(min(maxSize, readChunk))
	for next := lo; next < hi; {
		buf, err := g.log.Read(int64(next), chunk)
		if err != nil {
			return nil, fmt.Errorf("%w: read entry %d: %v", ErrDamaged, next, err)
		}
		if len(buf) == 0 {
			return nil, fmt.Errorf("%w: entry %d is missing", ErrDamaged, next)
		}
		for len(buf) > 0 && next < hi {
			n, err := batch.FrameSize(buf)
			if err != nil || n > int64(len(buf)) {
				return nil, fmt.Errorf("%w: entry %d: bad frame", ErrDamaged, next)
			}
			e, err := decodeEntry(buf[:n], next)
			if err != nil {
				return nil, err
			}
			if size += uint64(e.Size()); len(out) > 0 && size > maxSize {
				return out, nil
			}
			out = append(out, e)
			next++
			buf = buf[n:]
		}
	}
	return out, nil
}

// Snapshot implements raft.Storage: the latest durable snapshot, read from
// its file (the group keeps only its metadata in memory). A file that no
// longer passes its checksum is ErrSnapshotTemporarilyUnavailable, so the
// leader retries instead of the raft core panicking; Err reports it.
func (g *Group) Snapshot() (pb.Snapshot, error) {
	// Held while reading, so CreateSnapshot or ApplySnapshot cannot
	// replace the file between taking meta and reading it.
	g.mu.RLock()
	meta := g.snap
	if meta.Index == 0 {
		g.mu.RUnlock()
		return pb.Snapshot{}, nil
	}
	s, err := g.readSnapshot()
	g.mu.RUnlock()
	if err == nil && (s.Metadata.Index != meta.Index || s.Metadata.Term != meta.Term) {
		err = fmt.Errorf("%w: snapshot file at %d/%d, want %d/%d", ErrFileDamaged, s.Metadata.Index, s.Metadata.Term, meta.Index, meta.Term)
	}
	if err != nil {
		g.store.opts.Logger.Error("raftstore: snapshot unreadable", "group", g.id, "err", err)
		g.fail(err)
		return pb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable // compared with ==
	}
	return s, nil
}

func (g *Group) readSnapshot() (pb.Snapshot, error) {
	b, err := vfs.ReadFile(g.fs, filepath.Join(g.dir, snapshotFile))
	if err != nil {
		return pb.Snapshot{}, err
	}
	return decodeSnapshot(b)
}

// fail records the first error that makes the group refuse writes.
func (g *Group) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed == nil {
		g.failed = err
	}
}
