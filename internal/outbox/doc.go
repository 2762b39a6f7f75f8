// Package outbox is the relay of the transactional outbox: it moves the rows
// an application committed into an outbox table (in the same local
// transaction as its business change) to a sluice queue or topic, and marks
// them sent, or deletes them, only after the broker's durable ack.
//
// Two modes: polling (PostgreSQL, MySQL/MariaDB, SQLite), which claims
// unsent rows in id order in bounded batches with FOR UPDATE SKIP LOCKED
// where the database has it; and CDC (PostgreSQL), which reads the outbox
// table's inserts from a logical replication slot (pgoutput) in commit
// order and confirms the slot's position only after the broker's ack.
// Both are at-least-once: a crash between the publish and the mark (or the
// confirm) publishes again, and every message carries the row's event id
// (client/inbox.EventIDKey, a header or attribute; the deduplication id on
// FIFO queues) so the broker's dedup window and the consumer's inbox absorb
// the repeat. docs/outbox.md has the table shape, the guarantees and the
// failure table.
//
// The relay is a client of the broker, never part of it: it publishes
// through the public Go client (package client) over the native API, and
// must never import the broker or anything under internal/ but itself.
package outbox
