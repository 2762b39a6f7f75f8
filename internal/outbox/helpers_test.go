package outbox

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/client/inbox"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/sluicetest"
)

// One PostgreSQL and one MariaDB server for the whole package, started by
// the first test that needs each.
var dbs testproc.Databases

func TestMain(m *testing.M) {
	code := m.Run()
	dbs.Stop()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// The sluice binary, built once for the package's process tests.
var (
	binOnce sync.Once
	binDir  string
	binPath string
)

func sluiceBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		d, err := os.MkdirTemp("", "sluice-outbox-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = d
		binPath = testproc.Build(t, d)
	})
	if binPath == "" {
		t.Fatal("building the sluice binary failed in an earlier test")
	}
	return binPath
}

// driverCase is one database the polling relay runs on.
type driverCase struct {
	driver string
	dsn    func(t *testing.T) string
	insert string // event_id, msg_key, payload, headers
}

var drivers = []driverCase{
	{"postgres", func(t *testing.T) string { return dbs.Postgres(t) },
		`INSERT INTO outbox (event_id, msg_key, payload, headers) VALUES ($1, $2, $3, $4)`},
	{"mysql", func(t *testing.T) string { return dbs.MariaDB(t) },
		`INSERT INTO outbox (event_id, msg_key, payload, headers) VALUES (?, ?, ?, ?)`},
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "app.db") },
		`INSERT INTO outbox (event_id, msg_key, payload, headers) VALUES (?, ?, ?, ?)`},
}

// env is one relay's world: an application database with the outbox
// table, a broker, and a client of it.
type env struct {
	dc  driverCase
	cfg Config
	db  *sql.DB
	c   *client.Client
}

func newEnv(t *testing.T, dc driverCase, cfg Config) *env {
	t.Helper()
	cfg.Driver, cfg.DSN = dc.driver, dc.dsn(t)
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := Migrate(t.Context(), db, cfg.Driver, cfg.Table); err != nil {
		t.Fatal(err)
	}
	c, _ := sluicetest.New(t)
	return &env{dc: dc, cfg: cfg, db: db, c: c}
}

// insert commits one outbox row on its own (q is the db or a transaction).
func (e *env) insert(t *testing.T, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, eventID, key, payload, headers string) {
	t.Helper()
	var k, h any
	if key != "" {
		k = key
	}
	if headers != "" {
		h = headers
	}
	if _, err := q.ExecContext(t.Context(), e.dc.insert, eventID, k, []byte(payload), h); err != nil {
		t.Fatalf("insert %s: %v", eventID, err)
	}
}

func (e *env) relay(t *testing.T) *Relay {
	t.Helper()
	pub, err := NewPublisher(t.Context(), e.c, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(e.cfg, e.db, pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// drain runs Step until a claim finds nothing, and returns the rows relayed.
func drain(t *testing.T, r *Relay) int {
	t.Helper()
	total := 0
	for range 1000 {
		n, err := r.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
	t.Fatal("relay still finding rows after 1000 steps")
	return total
}

// receiveAll receives and acks from queue until want messages came or 10 s
// passed, and returns the event ids in delivery order.
func receiveAll(t *testing.T, c *client.Client, queue string, want int) []string {
	t.Helper()
	var ids []string
	deadline := time.Now().Add(10 * time.Second)
	for len(ids) < want && time.Now().Before(deadline) {
		msgs, err := c.Receive(t.Context(), queue, client.MaxMessages(100), client.Wait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			ids = append(ids, inbox.EventID(m))
			if err := c.Ack(t.Context(), queue, m.GetReceipt()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ids
}

func unsent(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func rows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM outbox").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
