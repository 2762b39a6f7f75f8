// Package replpart is a topic partition replicated by one Raft group: the entry that
// carries the record batches of one produce, the state machine that hands committed
// batches to the partition's local log, and a small client API over a multiraft.Host whose
// Append returns after commit with the offsets apply assigned.
//
// It owns the order of a partition's writes (the group's log), the rule that offsets and
// producer deduplication are computed in apply (so every replica assigns the same ones),
// the stamping of each batch with its entry's Raft term as the leader epoch, and the tie
// between the local log's checkpoints and the group's snapshots: the local log is written
// without fsync, made durable at each snapshot (Log.Checkpoint), and after a crash cut back
// to the last snapshot's checkpoint (Log.Restore) before the host re-applies the committed
// entries after it. A snapshot is only a checkpoint, not the records: a replica whose local
// log is behind the checkpoint it restores (a new replica, a wiped log, a follower past the
// compacted Raft log) pulls the records from a peer's local log before Restore returns
// (seed.go, pull.go, over multiraft requests), which is what lets the host compact the Raft
// log behind every durable checkpoint (multiraft.SnapshotWanter, CompactionLimiter).
//
// It also owns the subscriptions' cursors of the partition (cursors.go): a subscription's
// receives, acks, nacks and extends are entries of the group beside the produces, applied
// to a queue.Cursor on every replica (through internal/cluster/replcursor, as the
// replicated queue's), fed from the local log (RecordLog) which holds exactly the applied
// records, and carried whole in the snapshot, so a replica seeded by a snapshot gets them
// and compaction never drops a cursor event.
//
// It never parses a batch (the broker validated it with storage.Log.Check before Append),
// and must never import the broker, a front-end, the server or the node (deps_test.go): the
// local log is the broker's, behind the Log interface. See docs/cluster.md, "Replicated
// partition".
package replpart
