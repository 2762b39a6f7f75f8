// Package raftstore makes a node's Raft state durable: for each Raft group,
// a raft.Storage (go.etcd.io/raft/v3) whose log is an internal/storage log,
// a small state file (ConfState, compaction point) and a snapshot file; for
// the node, one HardState log shared by every group and a Sync that makes
// the writes of many groups durable together (one concurrent round of log
// fdatasyncs, then one fdatasync of the HardState log when a term or vote
// changed: a commit index alone is written but not synced, sync.go).
//
// It owns the bytes under its directory and four promises, each checked by
// the crash tests on vfs.MemFS:
//
//   - an entry, HardState or snapshot is durable once the call that made it
//     so has returned (Sync, ApplySnapshot, CreateSnapshot, Compact) — a
//     HardState's commit index only once a Sync also changed some group's
//     term or vote (raft needs no durable commit index; Open raises it to
//     the snapshot);
//   - a durable HardState never has a commit index past the durable log
//     (Sync fdatasyncs a group's log before it writes its HardState);
//   - a term or vote, once Sync returned, is never forgotten, so a node
//     never votes twice in one term;
//   - what it serves through raft.Storage is what was appended: every entry
//     read back passed storage's CRC-32C and sits at its own index, and a
//     gap (a quarantined batch) is an error, never a silently shorter log.
//
// It must never import internal/broker or any front-end, never decide Raft
// logic (when to vote, append, compact or snapshot is the caller's, driven by
// RawNode's Ready), and never keep a group's snapshot bytes in memory (a
// node holds thousands of groups; Snapshot reads the file when a leader
// needs it).
//
// # Index and offset
//
// Raft index i is log offset i, and every entry is one record batch of one
// record: its leader epoch is the entry's term, its key one byte of entry
// type (normal, conf change, conf change v2), its value the entry's data (a
// Kafka null for nil data, so empty entries stay empty). Equal numbers make
// Term and Entries a lookup with no translation table, a conflicting suffix
// is cut with storage.Log.TruncateSuffix at an entry boundary (never inside a
// batch, which would make kept entries be rewritten), and compaction is
// storage's DeleteBelow of whole segments. The price is a batch header (61
// bytes) and a record frame (about 8 bytes) per entry; a run of entries is
// still written with one write(2) and made durable with one fdatasync.
//
// # On disk
//
// Under Options.Dir, the HardState log and one directory per group,
// g<id, 20 digits>:
//
//	hardstate.wal   every group's term, vote and commit (hswal.go)
//	g…/log/         the group's storage.Log: offset = Raft index
//	g…/state        ConfState, first index and its term, snapshot index, and
//	                a HardState with its sequence number (state.go)
//	g…/snapshot     snapshot metadata and the state machine's bytes (state.go)
//
// state and snapshot are replaced with vfs.WriteFileAtomic and end in a
// CRC-32C; a damaged one fails the group's Open rather than forget a vote
// or a snapshot. A group directory is created and removed whole (built or
// moved aside under a temporary name, then renamed). docs/cluster.md, "## Storage", says how a crash at each step of
// each operation is recovered and what every group costs in memory.
package raftstore
