// Package multiraft runs many Raft groups on one node: the engine room of sluice's cluster.
//
// It owns, for every group hosted on this node, a go.etcd.io/raft RawNode, the Ready loop
// that drives it (gather the Readys of every group with work, send what need not wait,
// persist them all, sync the storage engine once for all of them, send the answers, apply,
// advance), proposal tracking (a Propose returns once its entry is committed and applied
// here, with its index, or with a clear error), membership changes (ConfChangeV2),
// leadership transfer, quiescing of idle groups, a node-pair liveness signal that wakes
// quiesced groups whose leader's node went quiet, and an in-memory copy of each group's
// appended and not yet applied entries, so raft's reads of what it commits do not go back
// to disk (entrycache.go).
//
// It defines the two interfaces it is driven through and does not implement them for
// production: Engine/Storage (the durable Raft log, HardState and snapshots of every group,
// with one Sync for many groups; internal/cluster/raftstore implements it over sluice's
// storage, and internal/cluster/engine adapts it, since neither package may import the other) and Transport (batches of raft messages for many groups to one peer node;
// internal/cluster/memnet is the in-memory network the tests use). MemEngine is an in-memory
// Engine that can lose its unsynced writes, for tests and benchmarks.
//
// Time is ticks, from whoever calls Tick: Run drives Tick from a Ticker (NewTimeTicker in
// production, a hand-driven one in tests), and deterministic tests call Tick and
// ProcessReady themselves. While no group is awake, Run with a Sleeper (NewTimeTicker's)
// takes only the ticks the liveness beat and the peers' timeouts need, and counts the
// others when it wakes (sleep.go).
//
// A replica that lost its disk (restarted empty under its node ID) grants no vote until a
// leader has sent it the log, and a heartbeat committing past its log is dropped rather
// than stepped into raft's panic (voting.go).
//
// A storage failure stops the host (the node restarts from what its storage holds), except
// a write the disk had no room for: then the Ready loop stalls on that round, retries it
// until there is room and resumes where it stopped, and a state machine says the same of
// an entry with NoRoomError (diskfull.go).
//
// It must never import internal/broker, a front-end, the server or the node: it knows groups,
// entries and bytes, never topics, queues or protocols. State machines are the caller's; the
// host hands them committed entries in log order and never interprets their bytes. A state
// machine whose snapshot is not its whole state (a replicated partition's checkpoint)
// implements CompactionLimiter, and the host keeps the log it needs; one that paces its own
// snapshots implements SnapshotWanter, and one whose snapshot grows with its state (a
// queue's backlog) SnapshotPacer; one whose snapshot is long to encode implements
// SnapshotCapturer, and the host encodes it off the Ready loop (encode.go); one whose Restore
// of a leader's snapshot is long implements SnapshotPreparer, and the host prepares it off
// the Ready loop before raft sees it (prepare.go). Requests (request.go) are a small exchange between a
// group's replicas outside Raft, carried by a Transport that is also a Requester: a
// partition replica pulls the records its snapshot names through them.
package multiraft
