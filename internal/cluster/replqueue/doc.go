// Package replqueue is a work queue replicated by one Raft group: the state machine that
// runs the pure cursor of internal/queue on every replica from the group's committed
// entries, the encoding of its commands, and a small client API over a multiraft.Host
// whose calls return after commit with the result apply computed.
//
// It owns the queue's replicated state: which messages exist (their bodies are in the
// entries: the Raft log is the queue's log), the cursor driven only by committed commands,
// and the rules that make every replica compute the same state — time comes from the
// entry (the proposing leader's clock, clamped so it never goes back), and receipts,
// deadlines and offsets are computed in apply. A receipt is therefore valid on every
// replica exactly when the Receive that issued it was committed, which is what fences an
// old leader: nothing it did counts unless it is in the log.
//
// It must never import the broker, a front-end, the server or the node (deps_test.go),
// read a clock in apply, or keep state outside the entries and snapshots: a replica that
// restores a snapshot and applies the tail must hold what one that applied every entry
// holds. See docs/cluster.md, "Replicated queue".
package replqueue
