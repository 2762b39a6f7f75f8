// Package replcursor is what the cluster's replicated cursors share: a queue.Cursor driven
// by committed Raft entries only, on every replica of a group. The replicated queue
// (internal/cluster/replqueue: one group per queue) and the replicated partition's
// subscriptions (internal/cluster/replpart: a subscription's cursor in its partition's
// group) both run their cursor events through it:
//
//   - Op, the cursor commands (Receive, Ack, Nack, Extend) with their encoding, and Run,
//     which applies one to a cursor: receipts, deadlines and receive counts are computed in
//     apply, from committed state and the entry only, so every replica computes the same;
//   - Clock, the group's time: apply uses max(stamp, last applied time), so a group's time
//     never goes back whatever the clocks of successive leaders do;
//   - Results, what apply computed for the proposing node's own entries, keyed by log index
//     and checked against the request number, taken by the API call once its entry applied.
//
// Fencing across failover follows from the above: a receipt reaches a client only once the
// Receive that issued it committed (its entry applied on the proposer), so it is the cursor
// state of every replica, and a new leader honours it; a Receive an old leader could not
// commit never answered, and its receipt exists nowhere. An Ack that answered committed, so
// no failover undoes it. docs/cluster.md, "Replicated queue" and "Replicated partition".
//
// It owns no group and no log, never reads a clock, and must never import multiraft's
// hosts, the broker or anything above them.
package replcursor
