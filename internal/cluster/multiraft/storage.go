package multiraft

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Storage is one group's Raft state on this node. Reads are raft.Storage's (raft reads them
// from the host's goroutines while the Ready loop writes). Writes are the three a Ready
// needs, plus snapshot creation and log compaction; none is durable until the Engine's next
// Sync returns, and the host sends no answer (append or vote response) before that, and
// applies before it only committed entries that an earlier Sync made durable (ready.go).
//
// Contract for implementations (internal/cluster/raftstore, MemEngine):
//   - Append replaces any entries at and after the first entry's index (a new leader's log
//     wins) and must accept entries that overlap the log's end.
//   - An Append the disk has no room for fails with an error matching syscall.ENOSPC (or
//     EDQUOT) and leaves the log as if it had not been called: the host writes the same
//     entries again once there is room (diskfull.go).
//   - ApplySnapshot replaces the whole log by the snapshot (ErrSnapOutOfDate if older).
//   - After a crash, everything written before the last successful Sync is there, and
//     nothing written after it is partly there in a way raft.Storage would expose: a torn
//     append is cut back to whole entries.
type Storage interface {
	raft.Storage
	Append(entries []raftpb.Entry) error
	SetHardState(st raftpb.HardState) error
	ApplySnapshot(snap raftpb.Snapshot) error
	// CreateSnapshot records data, the state machine as of index i (i <= applied), with
	// the configuration cs; Compact then discards the log before index i.
	CreateSnapshot(i uint64, cs *raftpb.ConfState, data []byte) (raftpb.Snapshot, error)
	Compact(i uint64) error
}

// Engine is a node's storage for all its groups. One Sync makes the writes of many groups
// durable: the host calls it once per Ready round with every group that round wrote (group
// commit across groups, as a shared WAL does), and once when CreateGroup bootstraps a
// group, possibly at the same time. Its methods may be called from several goroutines.
//
// internal/cluster/raftstore's Store has this shape (Group, RemoveGroup, Sync of the given
// groups) over uint64 ids and its own *Group, which has Storage's methods: an adapter is
// a type conversion per call.
type Engine interface {
	// Group opens group g's storage, creating it empty if it does not exist.
	Group(g GroupID) (Storage, error)
	// RemoveGroup deletes group g's storage.
	RemoveGroup(g GroupID) error
	// Sync makes every write so far to the given groups' storages (each one Group
	// returned) durable, or fails: then none of it may be counted on. A Sync that found
	// no room (an error matching syscall.ENOSPC or EDQUOT) with no group's storage
	// failed (raftstore's Err) must make them durable when called again (diskfull.go).
	Sync(written []Storage) error
}
