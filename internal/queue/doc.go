// Package queue owns the work-queue cursor: the per-message state a queue keeps on top of a
// partition log (SQS / RabbitMQ semantics). It decides which message is delivered next, hides
// it for a visibility timeout, checks receipts and fencing tokens, counts receives, moves poison
// messages to the dead-letter outcome, holds delayed and nacked messages, keeps FIFO groups in
// order, drops messages past retention, and tracks the ack floor below which the log may be
// deleted. Deduper is the matching pure deduplication window.
//
// The package is pure: it must never do I/O, start goroutines, or read the clock. Every call
// that depends on time takes `now` from the caller, so tests drive time and replays are exact.
// Callers pass a non-decreasing `now` (the cursor remembers the latest one it saw).
// It never holds message bodies: the broker reads them from the log by offset.
//
// # How the broker drives a Cursor
//
//	for c.Wants() > 0 { metas := log.ReadMetas(c.ReadPos(), c.Wants()); c.Offer(now, metas) }
//	ds, evs, err := c.Receive(now, 10, 0)  // journal evs (group commit), then answer
//	evs, err := c.Ack(now, receipt)         // likewise Extend, Nack, Purge, Skip
//	storage.DeleteBelow(c.Floor())
//
// Memory grows with messages in flight, delayed, or buffered in the bounded lookahead window
// (Config.Lookahead); never with the backlog still in the log. Done offsets above the floor are
// kept as a run set, so out-of-order acks cost one run per gap, not one entry per offset.
//
// # Journal and recovery
//
// Every mutating call returns the Events that describe its effect. The cursor applies them to
// itself through Apply, the same function a replay uses, so New(cfg) followed by Apply of every
// journaled event (or Restore of a Snapshot followed by Apply of the tail) rebuilds the same
// durable state. What is deliberately not journaled is the lookahead buffer of messages that
// were read from the log but never delivered: it is re-read from the log after a restart
// (ReadPos rewinds to the first offset that is neither done nor known). Deadlines survive a
// restart, so an in-flight message becomes visible again when its visibility timeout ends, its
// receipt stays valid until then, and receive counts carry on, so a message that crashes the
// broker still reaches its dead-letter outcome. The broker may journal a receive's
// DeadLettered events after its other events (once the dead-letter copy is durable); replay
// gives the same state in either order, and if a crash loses the DeadLettered event, the
// message is dead-lettered again (at most duplicated in the DLQ, never lost).
//
// Event encoding (one event per journal record; integers are varints, times are Unix
// nanoseconds as signed varints with 0 meaning "unset", strings are uvarint length + bytes):
//
//	+------+----------------------------------------------+
//	| kind | fields of that kind, in declaration order     |
//	+------+----------------------------------------------+
//	 1 byte
//
//	1 Delivered     offset token count at deadline firstAt sentAt groupID
//	2 Acked         offset
//	3 Extended      offset deadline
//	4 Nacked        offset availableAt reason
//	5 DeadLettered  offset count firstAt lastAt sentAt groupID reason
//	6 Expired       from length          (a range of offsets)
//	7 Purged        upTo
//	8 Skipped       from length
//
// A record holds exactly one event: trailing bytes, unknown kinds and out-of-range integers are
// refused (ErrBadEvent), so a torn or corrupt journal record is never half-applied.
//
// Snapshot encoding: see snapshot.go.
package queue
