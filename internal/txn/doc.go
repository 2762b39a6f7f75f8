// Package txn is Kafka's transaction coordinator (KIP-98, with KIP-890's
// server-side checks): for each transactional.id the producer id and epoch
// it holds, the state of its current transaction (Empty, Ongoing,
// PrepareCommit/PrepareAbort, CompleteCommit/CompleteAbort), the partitions
// and consumer groups in it, the offsets committed inside it
// (TxnOffsetCommit), and its timeout.
//
// Every change is made durable in a small append-only log in the data
// directory (transactions.log: records framed with a length and a CRC-32C,
// each the whole state of one transactional id; a torn tail is cut at open;
// rewritten when mostly stale) before it is answered or acted on. The
// records are group committed: one is written under the coordinator's lock
// and made visible at once, and every answer about its id waits, outside
// the lock, for a sync that covers it, so transactions running at once
// share fdatasyncs (log.go). In a cluster a Store replaces that file
// (Config.Store): the controller's records are entries of the metadata
// group, proposed under the lock and awaited outside it the same way.
//
// The coordinator is a state machine with an injected clock. What a
// transaction does outside it is injected too (Effects): allocating or
// bumping a producer epoch, writing the commit or abort markers into the
// partitions, applying the offsets to the groups. It runs those effects
// between its Prepare and Complete states, without its lock held, and
// answers CONCURRENT_TRANSACTIONS to the transaction's producer meanwhile.
// A completion interrupted (a crash, a failed disk) is finished by Tick and
// at open: markers are written again, which readers tolerate.
//
// KIP-890 part 2 (v2.go) is served beside KIP-98's rules, chosen by the
// request's version: EndTxnBump bumps the epoch at every end in the same
// record as the decision (producer ids learn of it through Effects'
// floor at the next InitProducer), AddImplicit and CommitOffsetsImplicit
// add what produce and TxnOffsetCommit name, and ErrAbortable tells a
// producer its transaction was aborted under it.
//
// It owns the transaction states and their file; it must never append to a
// partition log or touch a group itself, nor know of a wire protocol.
package txn
