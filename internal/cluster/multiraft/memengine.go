package multiraft

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// MemEngine is an in-memory Engine for tests and benchmarks. It keeps two copies of every
// group: the live one raft reads and writes, and the durable one as of the last Sync; Crash
// throws the live copies away and starts again from the durable ones, as a power cut loses
// what was never synced.
type MemEngine struct {
	// SyncDelay, when set, is slept in every Sync, to stand for an fdatasync's cost.
	SyncDelay time.Duration

	mu       sync.Mutex // guards groups, syncs, failSync
	groups   map[GroupID]*memGroup
	syncs    int
	failSync int
}

// ErrInjectedSync is what a Sync armed by FailNextSync returns.
var ErrInjectedSync = errors.New("multiraft: injected sync failure")

// FailNextSync makes the next Sync fail and make nothing durable, as a disk error would:
// the host stops (ProcessReady returns the error) and the node must restart from what was
// synced before.
func (e *MemEngine) FailNextSync() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failSync++
}

// NewMemEngine returns an empty engine.
func NewMemEngine() *MemEngine { return &MemEngine{groups: map[GroupID]*memGroup{}} }

// memGroup is one group's storage: live reads and writes, and the writes since the last
// Sync, replayed onto durable when it comes.
type memGroup struct {
	*raft.MemoryStorage
	mu      sync.Mutex // guards pending, durable
	pending []func(*raft.MemoryStorage) error
	durable *raft.MemoryStorage
}

// Group opens or creates g.
func (e *MemEngine) Group(g GroupID) (Storage, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.groups[g]
	if !ok {
		s = &memGroup{MemoryStorage: raft.NewMemoryStorage(), durable: raft.NewMemoryStorage()}
		e.groups[g] = s
	}
	return s, nil
}

// RemoveGroup forgets g, durably at once (a test engine has no half-removed state).
func (e *MemEngine) RemoveGroup(g GroupID) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.groups, g)
	return nil
}

// Sync makes the given groups' writes so far durable; other groups' stay unsynced.
func (e *MemEngine) Sync(written []Storage) error {
	if e.SyncDelay > 0 {
		time.Sleep(e.SyncDelay)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failSync > 0 {
		e.failSync--
		return ErrInjectedSync
	}
	e.syncs++
	for _, st := range written {
		s, ok := st.(*memGroup)
		if !ok {
			return fmt.Errorf("multiraft: MemEngine.Sync of a %T, not one of its groups", st)
		}
		s.mu.Lock()
		for _, op := range s.pending {
			if err := op(s.durable); err != nil {
				s.mu.Unlock()
				return err
			}
		}
		s.pending = nil
		s.mu.Unlock()
	}
	return nil
}

// ClearSyncFailures disarms FailNextSync.
func (e *MemEngine) ClearSyncFailures() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failSync = 0
}

// Syncs counts the Sync calls so far.
func (e *MemEngine) Syncs() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.syncs
}

// Crash drops every write since the last Sync. The host that used the engine must be
// discarded first: its RawNodes hold state that was never durable.
func (e *MemEngine) Crash() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.groups {
		live, err := cloneStorage(s.durable)
		if err != nil {
			return err
		}
		s.MemoryStorage, s.pending = live, nil
	}
	return nil
}

// cloneStorage copies a MemoryStorage: its snapshot, entries and HardState. The entries
// below the snapshot that were never compacted stay (as raftstore keeps them across a
// restart): installing the snapshot first would discard them, which is a compaction the
// host did not ask for and that a CompactionLimiter forbids.
func cloneStorage(src *raft.MemoryStorage) (*raft.MemoryStorage, error) {
	dst := raft.NewMemoryStorage()
	snap, err := src.Snapshot()
	if err != nil {
		return nil, err
	}
	first, _ := src.FirstIndex()
	last, _ := src.LastIndex()
	base := snap
	if !raft.IsEmptySnap(snap) && snap.Metadata.Index >= first {
		// The log starts before the snapshot: start dst where src's log starts, then
		// record the snapshot over the entries, as CreateSnapshot did.
		term, err := src.Term(first - 1)
		if err != nil {
			return nil, err
		}
		base = raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: first - 1, Term: term, ConfState: snap.Metadata.ConfState}}
	}
	if !raft.IsEmptySnap(base) {
		if err := dst.ApplySnapshot(base); err != nil {
			return nil, err
		}
	}
	if last >= first {
		ents, err := src.Entries(first, last+1, ^uint64(0))
		if err != nil {
			return nil, err
		}
		if err := dst.Append(ents); err != nil {
			return nil, err
		}
	}
	if base.Metadata.Index != snap.Metadata.Index {
		cs := snap.Metadata.ConfState
		if _, err := dst.CreateSnapshot(snap.Metadata.Index, &cs, snap.Data); err != nil {
			return nil, err
		}
	}
	hs, _, err := src.InitialState()
	if err != nil {
		return nil, err
	}
	return dst, dst.SetHardState(hs)
}

func (s *memGroup) record(op func(*raft.MemoryStorage) error) error {
	if err := op(s.MemoryStorage); err != nil {
		return err
	}
	s.mu.Lock()
	s.pending = append(s.pending, op)
	s.mu.Unlock()
	return nil
}

func (s *memGroup) Append(ents []raftpb.Entry) error {
	ents = append([]raftpb.Entry(nil), ents...)
	return s.record(func(m *raft.MemoryStorage) error { return m.Append(ents) })
}

func (s *memGroup) SetHardState(st raftpb.HardState) error {
	return s.record(func(m *raft.MemoryStorage) error { return m.SetHardState(st) })
}

func (s *memGroup) ApplySnapshot(snap raftpb.Snapshot) error {
	return s.record(func(m *raft.MemoryStorage) error { return m.ApplySnapshot(snap) })
}

func (s *memGroup) CreateSnapshot(i uint64, cs *raftpb.ConfState, data []byte) (raftpb.Snapshot, error) {
	snap, err := s.MemoryStorage.CreateSnapshot(i, cs, data)
	if err != nil {
		return snap, err
	}
	s.mu.Lock()
	s.pending = append(s.pending, func(m *raft.MemoryStorage) error {
		// Replayed in order, so the durable log already holds index i.
		if _, err := m.CreateSnapshot(i, cs, data); err != nil && err != raft.ErrSnapOutOfDate {
			return err
		}
		return nil
	})
	s.mu.Unlock()
	return snap, nil
}

func (s *memGroup) Compact(i uint64) error {
	return s.record(func(m *raft.MemoryStorage) error {
		if err := m.Compact(i); err != nil && err != raft.ErrCompacted {
			return err
		}
		return nil
	})
}
