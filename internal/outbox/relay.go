package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Relay is the polling relay over one outbox table: claim, publish, mark.
type Relay struct {
	cfg      Config
	db       *sql.DB
	d        *dialect
	pub      Publisher
	log      *slog.Logger
	metrics  *Metrics
	claimSQL string
	statsSQL string
	// afterPublish, when set (tests), runs between the broker's ack and
	// the mark: the window a crash turns into a republish.
	afterPublish func([]Event)
}

// NewRelay returns the polling relay of cfg (Normalize'd) over db, an open
// handle of cfg.Driver. log may be nil.
func NewRelay(cfg Config, db *sql.DB, pub Publisher, log *slog.Logger) (*Relay, error) {
	if err := cfg.Normalize(); err != nil {
		return nil, err
	}
	if cfg.Mode != "polling" {
		return nil, fmt.Errorf("outbox: NewRelay is the polling relay, config has mode %q", cfg.Mode)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := dialects[cfg.Driver]
	return &Relay{cfg: cfg, db: db, d: d, pub: pub, log: log,
		metrics:  newMetrics(cfg.Table, destination(cfg)),
		claimSQL: d.claimSQL(cfg.Table, cfg.Lock == "wait"),
		statsSQL: fmt.Sprintf(d.stats, cfg.Table),
	}, nil
}

func destination(cfg Config) string {
	if cfg.Topic != "" {
		return "topic:" + cfg.Topic
	}
	return "queue:" + cfg.Queue
}

// Metrics returns the relay's counters and gauges.
func (r *Relay) Metrics() *Metrics { return r.metrics }

// Run relays until ctx ends, then returns nil. A failed step (database or
// broker down) is logged, counted and retried with a capped backoff; the
// rows it held stay unsent and are claimed again.
func (r *Relay) Run(ctx context.Context) error {
	r.log.Info("outbox relay started", "table", r.cfg.Table, "destination", destination(r.cfg), "mode", "polling")
	var failures int
	var lastStats time.Time
	for ctx.Err() == nil {
		n, err := r.Step(ctx)
		if ctx.Err() != nil {
			break
		}
		// The backlog is queried after every short claim and at least once
		// a second, failed steps included: during a broker outage the
		// oldest row's age is what the alert watches.
		if time.Since(lastStats) >= time.Second || (err == nil && n < r.cfg.Batch) {
			if serr := r.RefreshStats(ctx); serr != nil && ctx.Err() == nil {
				r.metrics.errors.Add(1)
				r.log.Warn("outbox stats query failed", "err", serr)
			}
			lastStats = time.Now()
		}
		if err != nil {
			failures++
			r.metrics.errors.Add(1)
			r.log.Warn("outbox relay step failed", "err", err, "failures", failures)
			sleep(ctx, backoff(failures))
			continue
		}
		failures = 0
		if n < r.cfg.Batch {
			sleep(ctx, r.cfg.Interval)
		}
	}
	r.log.Info("outbox relay stopped")
	return nil
}

// Step claims up to Batch unsent rows in id order, publishes them and,
// only after the broker's ack, marks (or deletes) them. It returns how
// many rows it relayed. On PostgreSQL and MySQL the claim, the publish and
// the mark are one transaction holding the rows' locks, so a second relay
// skips (or waits for) them; a crash anywhere before the commit leaves
// them unsent, to be published again.
func (r *Relay) Step(ctx context.Context) (int, error) {
	if !r.d.holdLocks {
		return r.stepUnlocked(ctx)
	}
	// READ COMMITTED: InnoDB's default REPEATABLE READ would have the
	// claim lock the gap after the last unsent row, and every insert of a
	// new row would wait for the broker's round trip
	// (TestClaimDoesNotBlockInserts). It is PostgreSQL's default anyway.
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	evs, err := r.claim(ctx, tx)
	if err != nil || len(evs) == 0 {
		return 0, errors.Join(err, tx.Commit())
	}
	if err := r.publish(ctx, evs); err != nil {
		return 0, err
	}
	// The events are durable in the broker: finish the mark even if ctx
	// ends now (a shutdown), or they would be published again.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.done(mctx, tx, evs); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("outbox: commit the mark of %d published rows (they will be published again): %w", len(evs), err)
	}
	r.metrics.published.Add(int64(len(evs)))
	return len(evs), nil
}

// stepUnlocked is Step for SQLite: a plain read, the publish, then the mark
// in a short write transaction, so the database's one write lock is never
// held across a broker round trip.
func (r *Relay) stepUnlocked(ctx context.Context) (int, error) {
	evs, err := r.claim(ctx, r.db)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	if err := r.publish(ctx, evs); err != nil {
		return 0, err
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tx, err := r.db.BeginTx(mctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if err := r.done(mctx, tx, evs); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	r.metrics.published.Add(int64(len(evs)))
	return len(evs), nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (r *Relay) claim(ctx context.Context, q querier) ([]Event, error) {
	rows, err := q.QueryContext(ctx, r.claimSQL, r.cfg.Batch)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	defer rows.Close()
	var evs []Event
	for rows.Next() {
		var ev Event
		var key sql.NullString
		var headers []byte
		if err := rows.Scan(&ev.ID, &ev.EventID, &key, &ev.Payload, &headers); err != nil {
			return nil, fmt.Errorf("outbox: claim: %w", err)
		}
		ev.Key = key.String
		if ev.Headers, err = decodeHeaders(headers); err != nil {
			// Never skipped: a row the relay cannot send stops it (errors
			// and the oldest-row age rise) until someone fixes the row.
			return nil, fmt.Errorf("outbox: row id %d (event %q): %w", ev.ID, ev.EventID, err)
		}
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	r.metrics.claims.Add(1)
	return evs, nil
}

func (r *Relay) publish(ctx context.Context, evs []Event) error {
	if err := r.pub.Publish(ctx, evs); err != nil {
		return fmt.Errorf("outbox: publish %d events (rows %d..%d): %w", len(evs), evs[0].ID, evs[len(evs)-1].ID, err)
	}
	if r.afterPublish != nil {
		r.afterPublish(evs)
	}
	return nil
}

func (r *Relay) done(ctx context.Context, tx *sql.Tx, evs []Event) error {
	ids := make([]any, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	if _, err := tx.ExecContext(ctx, r.d.doneSQL(r.cfg.Table, r.cfg.OnSent == "delete", len(ids)), ids...); err != nil {
		return fmt.Errorf("outbox: %s %d published rows (they will be published again): %w", r.cfg.OnSent, len(ids), err)
	}
	return nil
}

// RefreshStats queries the unsent rows' count and oldest age into the
// metrics.
func (r *Relay) RefreshStats(ctx context.Context) error {
	var n int64
	var age float64
	if err := r.db.QueryRowContext(ctx, r.statsSQL).Scan(&n, &age); err != nil {
		return fmt.Errorf("outbox: stats: %w", err)
	}
	r.metrics.setBacklog(n, max(age, 0))
	return nil
}

// backoff is the pause after the n-th failure in a row: 100ms doubling to
// 5s.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
