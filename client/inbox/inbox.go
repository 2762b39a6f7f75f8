// Package inbox is the idempotent consumer's half of at-least-once: it runs
// a handler's database effect and records the message's event id in an
// inbox table in one local transaction, so a redelivery (a consumer crash
// before its ack, a relay that republished after a crash) finds the id
// already there and is skipped, and acked, without a second effect.
//
//	in, _ := inbox.New(db, inbox.Postgres)
//	w := c.NewWorker("loyalty", in.Handler(func(ctx context.Context, tx *sql.Tx, m *client.Message) error {
//		_, err := tx.ExecContext(ctx, `UPDATE points SET n = n + $1 WHERE order_id = $2`, …)
//		return err
//	}))
//
// It dedupes by the event id the producer gave the event (EventIDKey, the
// attribute or header the outbox relay sets), never by offset or message
// id: a republished event is a new message at a new offset, and only its
// event id shows it is a repeat. It works with a queue receive, a topic
// subscription (record headers arrive as attributes) and a consumer group
// (commit the offset after the transaction; RecordEventID).
//
// A pgx pool is used through database/sql: stdlib.OpenDBFromPool(pool).
// This package owns the inbox table's statements; it holds no state of
// its own and must never import sluice's internal packages.
package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// EventIDKey is the message attribute (queues, subscriptions) and record
// header (topics) that carries an event's id. The outbox relay sets it from
// the row's event_id column; any producer may set it.
const EventIDKey = "event-id"

// EventID returns a received message's event id ("" when it has none).
func EventID(m *client.Message) string {
	return string(m.GetAttributes()[EventIDKey].GetValue())
}

// RecordEventID returns a fetched record's event id ("" when it has none).
func RecordEventID(r *client.Record) string {
	for _, h := range r.GetHeaders() {
		if h.GetKey() == EventIDKey {
			return string(h.GetValue())
		}
	}
	return ""
}

// ErrNoEventID is returned for a message without an event id: it cannot be
// deduplicated, so it is not applied (a Handler nacks it).
var ErrNoEventID = errors.New("inbox: message has no " + EventIDKey)

// Inbox records applied event ids in one table of the consumer's database.
type Inbox struct {
	db    *sql.DB
	d     dialect
	table string
	now   func() time.Time
}

// Option configures New.
type Option func(*Inbox)

// Table names the inbox table (default "inbox"; letters, digits and _).
func Table(name string) Option { return func(in *Inbox) { in.table = name } }

// Clock replaces time.Now as the source of applied_at (tests).
func Clock(now func() time.Time) Option { return func(in *Inbox) { in.now = now } }

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// New returns the inbox over db, a handle of the given database.
func New(db *sql.DB, d Dialect, opts ...Option) (*Inbox, error) {
	in := &Inbox{db: db, table: "inbox", now: time.Now}
	for _, o := range opts {
		o(in)
	}
	if !ident.MatchString(in.table) {
		return nil, fmt.Errorf("inbox: table %q is not a plain identifier", in.table)
	}
	dd, ok := dialects[d]
	if !ok {
		return nil, fmt.Errorf("inbox: unknown dialect %d", d)
	}
	in.d = dd
	return in, nil
}

// Migrate creates the inbox table and its index if missing.
func (in *Inbox) Migrate(ctx context.Context) error {
	for _, s := range in.d.schema(in.table) {
		if _, err := in.db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("inbox: migrate %s: %w", in.table, err)
		}
	}
	return nil
}

// Record inserts eventID into the inbox inside tx, the transaction of the
// effect it protects. It reports false when the id is already there (the
// effect happened before: the caller rolls back, or just commits nothing
// else, and acks). A concurrent transaction recording the same id makes
// this one wait for it, then see a repeat.
func (in *Inbox) Record(ctx context.Context, tx *sql.Tx, eventID string) (first bool, err error) {
	if eventID == "" {
		return false, ErrNoEventID
	}
	res, err := tx.ExecContext(ctx, in.d.insert(in.table), eventID, in.d.ts(in.now()))
	if err != nil {
		return false, fmt.Errorf("inbox: record %q: %w", eventID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("inbox: record %q: %w", eventID, err)
	}
	return n == 1, nil
}

// Apply runs effect and the insert of eventID in one transaction: it
// commits both, or neither. It reports false, without running effect, when
// eventID was applied before; an error from effect rolls back and is
// returned.
func (in *Inbox) Apply(ctx context.Context, eventID string, effect func(ctx context.Context, tx *sql.Tx) error) (applied bool, err error) {
	tx, err := in.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	first, err := in.Record(ctx, tx, eventID)
	if err != nil || !first {
		return false, err
	}
	if err := effect(ctx, tx); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("inbox: commit %q: %w", eventID, err)
	}
	return true, nil
}

// Handler adapts effect to a client.Worker handler: the message's event id
// and effect commit together, a repeat is skipped, and either way the
// worker acks after the commit. A message without an event id is nacked
// (ErrNoEventID), and after the queue's max receives dead-lettered.
func (in *Inbox) Handler(effect func(ctx context.Context, tx *sql.Tx, m *client.Message) error) client.Handler {
	return func(ctx context.Context, m *client.Message) error {
		_, err := in.Apply(ctx, EventID(m), func(ctx context.Context, tx *sql.Tx) error { return effect(ctx, tx, m) })
		return err
	}
}

// Prune deletes ids applied more than olderThan ago, batch rows per
// statement (each its own short transaction, so a large backlog never
// holds one long lock), until none is left or ctx ends. It returns how
// many it deleted. Keep olderThan well above the longest time a repeat
// can arrive after the original (the broker's retention, a relay's
// outage): a repeat after its id was pruned is applied again.
func (in *Inbox) Prune(ctx context.Context, olderThan time.Duration, batch int) (int64, error) {
	if batch < 1 {
		return 0, fmt.Errorf("inbox: prune batch %d, want at least 1", batch)
	}
	cutoff := in.d.ts(in.now().Add(-olderThan))
	var total int64
	for {
		res, err := in.db.ExecContext(ctx, in.d.prune(in.table), cutoff, batch)
		if err != nil {
			return total, fmt.Errorf("inbox: prune: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("inbox: prune: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}
