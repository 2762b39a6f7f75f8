// Package producer is Kafka's idempotent producer on the broker's side:
// producer ids handed out durably (IDs: a block reserved ahead, named
// producers fenced by epoch), and each partition's last batches per
// producer (State), so a retried batch is answered as the duplicate it is
// and a gap in sequence numbers is refused. State survives restarts as a
// snapshot in the partition's directory plus a scan of the log after it.
//
// It owns the sequence rules and their on-disk state; it must never append
// to a log (the broker does, holding State's lock) or know of topics,
// queues or protocols.
package producer

import "errors"

// Errors of idempotent produce, matched with errors.Is (the broker
// re-exports them; the Kafka codes are in its comments).
var (
	// ErrOutOfOrderSequence: a batch's base sequence is not the one after
	// the producer's last batch in this partition
	// (OUT_OF_ORDER_SEQUENCE_NUMBER). Nothing was stored.
	ErrOutOfOrderSequence = errors.New("out of order producer sequence number")
	// ErrFenced: a batch carries an epoch older than the producer id's
	// current one: a zombie (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH).
	ErrFenced = errors.New("producer epoch is fenced by a newer one")
	// ErrUnknownID: a batch names a producer id this broker never
	// allocated (UNKNOWN_PRODUCER_ID).
	ErrUnknownID = errors.New("unknown producer id")
)
