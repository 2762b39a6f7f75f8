// Package outbox_test measures the outbox relay (docs/outbox.md) on a real
// PostgreSQL with durable commits (fsync, synchronous_commit on) and a
// broker with fsync=always, beside the database's own insert rate in the
// same run:
//
//	SLUICE_OUTBOX_BENCH=1 go test -run TestOutboxBench -v -timeout 20m ./bench/outbox/
//
// SLUICE_OUTBOX_BENCH_DURATION (default 10s) is each live phase's length,
// SLUICE_OUTBOX_BENCH_ROWS (default 20000) the drained backlog. It is a
// benchmark run by hand, not a test: without SLUICE_OUTBOX_BENCH it skips.
package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/outbox"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/sluicetest"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestOutboxBench(t *testing.T) {
	if os.Getenv("SLUICE_OUTBOX_BENCH") == "" {
		t.Skip("a benchmark: SLUICE_OUTBOX_BENCH=1 runs it")
	}
	dur := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SLUICE_OUTBOX_BENCH_DURATION")); err == nil {
		dur = d
	}
	rows := envInt("SLUICE_OUTBOX_BENCH_ROWS", 20000)
	pg, err := testproc.StartPostgres("fsync=on", "synchronous_commit=on", "full_page_writes=on")
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	c, _ := sluicetest.New(t) // fsync=always

	t.Logf("PostgreSQL durable; broker fsync=always; %s per live phase, %d rows drained", dur, rows)
	ins := insertRate(t, pg.DSN, dur)
	t.Logf("insert only (order + outbox row per transaction, 8 writers): %.0f tx/s", ins)
	for _, batch := range []int{100, 500} {
		r := drain(t, c, pg.DSN, rows, batch)
		t.Logf("polling drain, batch %d: %d rows in %s = %.0f rows/s (claim, SendBatch, mark)", batch, rows, r.took.Round(time.Millisecond), float64(rows)/r.took.Seconds())
	}
	for _, mode := range []string{"polling", "cdc"} {
		for _, rate := range []int{1000, 0} {
			l := live(t, c, pg.DSN, mode, rate, dur)
			what := "as fast as 8 writers commit"
			if rate > 0 {
				what = fmt.Sprintf("%d orders/s offered", rate)
			}
			t.Logf("%s live, %s: %.0f committed/s, %.0f relayed/s, commit→ack p50 %s p99 %s max %s",
				mode, what, l.committed, l.relayed, l.p50, l.p99, l.max)
		}
	}
}

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	return db
}

// freshDB makes a database with the orders and outbox tables.
func freshDB(t *testing.T, dsn, name string) (*sql.DB, string) {
	t.Helper()
	root := openDB(t, dsn)
	defer root.Close()
	if _, err := root.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	d := dsn[:len(dsn)-len("/postgres?sslmode=disable")] + "/" + name + "?sslmode=disable"
	db := openDB(t, d)
	t.Cleanup(func() { db.Close() })
	if err := outbox.Migrate(t.Context(), db, "postgres", "outbox"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE orders (id BIGINT PRIMARY KEY, points INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db, d
}

var dbSeq atomic.Int32

func checkout(ctx context.Context, db *sql.DB, id int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, points) VALUES ($1, 1)`, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (event_id, msg_key, payload) VALUES ($1, $2, $3)`,
		"evt-"+strconv.FormatInt(id, 10), strconv.FormatInt(id, 10), fmt.Appendf(nil, `{"order_id":%d,"points":1}`, id)); err != nil {
		return err
	}
	return tx.Commit()
}

// writers runs 8 checkout loops until ctx ends (rate > 0: that many orders
// a second in total), calling before(id) just before each commit's start.
func writers(ctx context.Context, db *sql.DB, rate int, before func(id int64)) (committed int64) {
	var next, done atomic.Int64
	var tick <-chan time.Time
	if rate > 0 {
		tk := time.NewTicker(time.Second / time.Duration(rate))
		defer tk.Stop()
		tick = tk.C
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if tick != nil {
					select {
					case <-ctx.Done():
						return
					case <-tick:
					}
				}
				id := next.Add(1)
				if before != nil {
					before(id)
				}
				if checkout(ctx, db, id) == nil {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return done.Load()
}

func insertRate(t *testing.T, dsn string, dur time.Duration) float64 {
	db, _ := freshDB(t, dsn, fmt.Sprintf("ins%d", dbSeq.Add(1)))
	ctx, cancel := context.WithTimeout(t.Context(), dur)
	defer cancel()
	start := time.Now()
	n := writers(ctx, db, 0, nil)
	return float64(n) / time.Since(start).Seconds()
}

type drained struct{ took time.Duration }

func drain(t *testing.T, c *client.Client, dsn string, rows, batch int) drained {
	name := fmt.Sprintf("drain%d", dbSeq.Add(1))
	db, d := freshDB(t, dsn, name)
	if _, err := db.ExecContext(t.Context(), `INSERT INTO outbox (event_id, msg_key, payload)
SELECT 'evt-' || g, g::text, convert_to('{"order_id":' || g || ',"points":1}', 'UTF8') FROM generate_series(1, $1) g`, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueue(t.Context(), name, nil); err != nil {
		t.Fatal(err)
	}
	cfg := outbox.Config{Driver: "postgres", DSN: d, Queue: name, Batch: batch}
	r := newRelay(t, c, db, cfg, nil)
	start := time.Now()
	for total := 0; total < rows; {
		n, err := r.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return drained{time.Since(start)}
}

// timing is a Publisher that records when the broker acked each event.
type timing struct {
	outbox.Publisher
	mu    sync.Mutex
	acked map[string]time.Time
}

func (p *timing) Publish(ctx context.Context, evs []outbox.Event) error {
	if err := p.Publisher.Publish(ctx, evs); err != nil {
		return err
	}
	now := time.Now()
	p.mu.Lock()
	for _, ev := range evs {
		if _, ok := p.acked[ev.EventID]; !ok {
			p.acked[ev.EventID] = now
		}
	}
	p.mu.Unlock()
	return nil
}

func newRelay(t *testing.T, c *client.Client, db *sql.DB, cfg outbox.Config, wrap func(outbox.Publisher) outbox.Publisher) interface {
	Run(context.Context) error
	Step(context.Context) (int, error)
} {
	t.Helper()
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	pub, err := outbox.NewPublisher(t.Context(), c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		pub = wrap(pub)
	}
	if cfg.Mode == "cdc" {
		r, err := outbox.NewCDC(cfg, db, pub, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		return cdcStepper{r}
	}
	r, err := outbox.NewRelay(cfg, db, pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type cdcStepper struct{ *outbox.CDC }

func (cdcStepper) Step(context.Context) (int, error) { panic("CDC has no step") }

type liveResult struct {
	committed, relayed float64
	p50, p99, max      time.Duration
}

// live runs writers and the relay together for dur, then lets the relay
// catch up, and reports the rates and the delay from each commit's start
// to the broker's ack of its event.
func live(t *testing.T, c *client.Client, dsn, mode string, rate int, dur time.Duration) liveResult {
	name := fmt.Sprintf("live%d", dbSeq.Add(1))
	db, d := freshDB(t, dsn, name)
	if _, err := c.CreateQueue(t.Context(), name, nil); err != nil {
		t.Fatal(err)
	}
	tp := &timing{acked: map[string]time.Time{}}
	cfg := outbox.Config{Driver: "postgres", DSN: d, Queue: name, Mode: mode, Slot: name, Publication: name, Interval: 5 * time.Millisecond}
	r := newRelay(t, c, db, cfg, func(p outbox.Publisher) outbox.Publisher { tp.Publisher = p; return tp })
	rctx, stopRelay := context.WithCancel(t.Context())
	var rw sync.WaitGroup
	rw.Go(func() { _ = r.Run(rctx) })
	var mu sync.Mutex
	started := map[string]time.Time{}
	ctx, cancel := context.WithTimeout(t.Context(), dur)
	start := time.Now()
	n := writers(ctx, db, rate, func(id int64) {
		mu.Lock()
		started["evt-"+strconv.FormatInt(id, 10)] = time.Now()
		mu.Unlock()
	})
	cancel()
	elapsed := time.Since(start)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		tp.mu.Lock()
		got := len(tp.acked)
		tp.mu.Unlock()
		if int64(got) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopRelay()
	rw.Wait()
	var lat []time.Duration
	relayedInRun := 0
	tp.mu.Lock()
	for id, a := range tp.acked {
		if s, ok := started[id]; ok {
			lat = append(lat, a.Sub(s))
			if a.Before(start.Add(elapsed)) {
				relayedInRun++
			}
		}
	}
	tp.mu.Unlock()
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(100 * time.Microsecond)
	}
	return liveResult{committed: float64(n) / elapsed.Seconds(), relayed: float64(relayedInRun) / elapsed.Seconds(),
		p50: q(0.50), p99: q(0.99), max: q(1)}
}
