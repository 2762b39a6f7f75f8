package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sluice-mq/sluice/client/inbox"
	"github.com/sluice-mq/sluice/internal/testproc"
)

var dbs testproc.Databases

func TestMain(m *testing.M) {
	code := m.Run()
	dbs.Stop()
	os.Exit(code)
}

// consumerDB is one dialect's consumer database: a fresh database with a
// points table, the loyalty service of the seed.
type consumerDB struct {
	name    string
	dialect inbox.Dialect
	open    func(t *testing.T) *sql.DB
	// add is the effect: points[order] += n.
	add string
}

var consumerDBs = []consumerDB{
	{"postgres", inbox.Postgres, func(t *testing.T) *sql.DB { return openDB(t, "pgx", dbs.Postgres(t)) },
		`INSERT INTO points (order_id, n) VALUES ($1, $2) ON CONFLICT (order_id) DO UPDATE SET n = points.n + EXCLUDED.n`},
	{"mariadb", inbox.MySQL, func(t *testing.T) *sql.DB { return openDB(t, "mysql", dbs.MariaDB(t)) },
		`INSERT INTO points (order_id, n) VALUES (?, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n)`},
	{"sqlite", inbox.SQLite, func(t *testing.T) *sql.DB {
		// An immediate BEGIN takes the write lock up front, so concurrent
		// writers queue on the busy timeout instead of failing to upgrade.
		return openDB(t, "sqlite", filepath.Join(t.TempDir(), "c.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	}, `INSERT INTO points (order_id, n) VALUES (?, ?) ON CONFLICT (order_id) DO UPDATE SET n = n + excluded.n`},
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE points (order_id INTEGER PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func newInbox(t *testing.T, db *sql.DB, d inbox.Dialect, opts ...inbox.Option) *inbox.Inbox {
	t.Helper()
	in, err := inbox.New(db, d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return in
}

func (c consumerDB) addPoints(order, n int) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, c.add, order, n)
		return err
	}
}

func points(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT order_id, n FROM points ORDER BY order_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	s := ""
	for rows.Next() {
		var o, n int
		if err := rows.Scan(&o, &n); err != nil {
			t.Fatal(err)
		}
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("%d=%d", o, n)
	}
	return s
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The effect and the id commit together: a repeat is skipped, an effect
// that fails leaves no id behind (so its redelivery applies it), and a
// message without an id is refused.
func TestApplyOncePerEventID(t *testing.T) {
	for _, c := range consumerDBs {
		t.Run(c.name, func(t *testing.T) {
			db := c.open(t)
			in := newInbox(t, db, c.dialect)
			ctx := t.Context()
			steps := []struct {
				id          string
				order, n    int
				fail        bool
				wantApplied bool
				wantErr     bool
			}{
				{"evt-a", 101, 10, false, true, false},
				{"evt-a", 101, 10, false, false, false}, // repeat: skipped
				{"evt-b", 102, 5, true, false, true},    // effect fails: rolled back, id not kept
				{"evt-b", 102, 5, false, true, false},   // its redelivery applies it
				{"evt-b", 102, 5, false, false, false},
				{"", 103, 1, false, false, true}, // no event id
			}
			boom := errors.New("boom")
			for i, s := range steps {
				effect := c.addPoints(s.order, s.n)
				if s.fail {
					effect = func(ctx context.Context, tx *sql.Tx) error {
						if err := c.addPoints(s.order, s.n)(ctx, tx); err != nil {
							return err
						}
						return boom
					}
				}
				applied, err := in.Apply(ctx, s.id, effect)
				if applied != s.wantApplied || (err != nil) != s.wantErr {
					t.Fatalf("step %d (%s): applied %v err %v, want applied %v err %v", i, s.id, applied, err, s.wantApplied, s.wantErr)
				}
			}
			if got := points(t, db); got != "101=10 102=5" {
				t.Fatalf("points %q, want 101=10 102=5", got)
			}
			if n := count(t, db, "inbox"); n != 2 {
				t.Fatalf("inbox holds %d ids, want 2", n)
			}
		})
	}
}

// Two consumers handed the same event at once (a redelivery racing the
// original): the unique key makes one wait for the other, and the effect
// happens once.
func TestConcurrentRepeatAppliedOnce(t *testing.T) {
	for _, c := range consumerDBs {
		t.Run(c.name, func(t *testing.T) {
			db := c.open(t)
			in := newInbox(t, db, c.dialect)
			const racers = 4
			var wg sync.WaitGroup
			var mu sync.Mutex
			applied := 0
			for range racers {
				wg.Go(func() {
					ok, err := in.Apply(t.Context(), "evt-c", c.addPoints(103, 20))
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					if ok {
						applied++
					}
					mu.Unlock()
				})
			}
			wg.Wait()
			if applied != 1 || points(t, db) != "103=20" {
				t.Fatalf("applied %d times, points %q; want once, 103=20", applied, points(t, db))
			}
		})
	}
}

// Prune deletes only ids older than the window, in batches smaller than
// the backlog, and a repeat of a kept id is still skipped.
func TestPruneOldIDsInBatches(t *testing.T) {
	for _, c := range consumerDBs {
		t.Run(c.name, func(t *testing.T) {
			db := c.open(t)
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			in := newInbox(t, db, c.dialect, inbox.Clock(func() time.Time { return now }))
			ctx := t.Context()
			for i := range 25 {
				if _, err := in.Apply(ctx, fmt.Sprintf("old-%d", i), c.addPoints(1, 1)); err != nil {
					t.Fatal(err)
				}
			}
			now = now.Add(2 * time.Hour)
			for i := range 5 {
				if _, err := in.Apply(ctx, fmt.Sprintf("new-%d", i), c.addPoints(2, 1)); err != nil {
					t.Fatal(err)
				}
			}
			n, err := in.Prune(ctx, time.Hour, 10)
			if err != nil || n != 25 {
				t.Fatalf("pruned %d (%v), want 25", n, err)
			}
			if left := count(t, db, "inbox"); left != 5 {
				t.Fatalf("%d ids left, want 5", left)
			}
			if ok, err := in.Apply(ctx, "new-3", c.addPoints(2, 1)); ok || err != nil {
				t.Fatalf("repeat of a kept id: applied %v err %v", ok, err)
			}
			if n, err := in.Prune(ctx, time.Hour, 10); n != 0 || err != nil {
				t.Fatalf("second prune: %d %v", n, err)
			}
		})
	}
}

func TestNewRefusesBadTable(t *testing.T) {
	if _, err := inbox.New(nil, inbox.Postgres, inbox.Table("inbox; DROP TABLE x")); err == nil {
		t.Fatal("a table name with SQL in it was accepted")
	}
	if _, err := inbox.New(nil, inbox.Dialect(42)); err == nil {
		t.Fatal("an unknown dialect was accepted")
	}
}
