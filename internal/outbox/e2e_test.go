package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/client/inbox"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/sluicetest"
)

// The seed's scenario end to end, with every part real: checkout commits
// orders and their outbox rows on PostgreSQL; `sluice outbox relay`, a
// child process, publishes them to a sluice queue; the loyalty consumer
// applies each event with the inbox in its own database. The relay is
// SIGKILLed after the broker acked evt-b and before its mark committed (its
// UPDATE is held by a trigger on an advisory lock the test owns), so the
// restarted relay publishes evt-b again; the inbox applies it once.
func TestSeedRelayKilledBetweenPublishAndMark(t *testing.T) {
	bin := sluiceBin(t)
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "loyalty", nil); err != nil {
		t.Fatal(err)
	}
	dsn := dbs.Postgres(t)
	app := openPG(t, dsn)
	if err := Migrate(ctx, app, "postgres", "outbox"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, app, `CREATE TABLE orders (id INT PRIMARY KEY, points INT NOT NULL)`)
	// The crash window: the mark of evt-b waits on advisory lock 17.
	mustExec(t, app, `CREATE FUNCTION hold_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.event_id = 'evt-b' THEN PERFORM pg_advisory_lock(17); PERFORM pg_advisory_unlock(17); END IF;
  RETURN NEW;
END $$`)
	mustExec(t, app, `CREATE TRIGGER hold_mark BEFORE UPDATE ON outbox FOR EACH ROW EXECUTE FUNCTION hold_mark()`)
	hold, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if _, err := hold.ExecContext(ctx, `SELECT pg_advisory_lock(17)`); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		event string
		id, n int
	}{{"evt-a", 101, 10}, {"evt-b", 102, 5}, {"evt-c", 103, 20}, {"evt-d", 104, 8}, {"evt-e", 105, 12}} {
		checkout(t, app, o.event, o.id, o.n)
	}

	// The consumer: its own database, the points and the inbox.
	loyalty := newLoyalty(t, openPG(t, dbs.Postgres(t)))
	cctx, stopConsumer := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() { defer close(consumed); loyalty.consume(cctx, c, "loyalty") }()

	cfgPath := writeRelayConfig(t, dsn, "batch: 1")
	relay := testproc.Run(t, bin, "outbox", "relay", "--config", cfgPath, "--server", srv.URL, "--log-format", "json")
	waitFor(t, "the relay's mark of evt-b to wait on the advisory lock", func() bool {
		var n int
		err := app.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 17 AND NOT granted`).Scan(&n)
		return err == nil && n == 1
	})
	waitFor(t, "the consumer to apply evt-b", func() bool { return loyalty.appliedCount("evt-b") == 1 })
	relay.Kill()
	if _, err := hold.ExecContext(ctx, `SELECT pg_advisory_unlock(17)`); err != nil {
		t.Fatal(err)
	}

	relay = testproc.Run(t, bin, "outbox", "relay", "--config", cfgPath, "--server", srv.URL, "--log-format", "json")
	metricsURL := "http://" + relay.Addr("metrics") + "/metrics"
	waitFor(t, "every event applied and no row unsent", func() bool {
		var unsent int
		_ = app.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent)
		return unsent == 0 && loyalty.applied() == 5 && loyalty.deliveries() >= 6
	})
	waitFor(t, "the relay's metrics to show no backlog", func() bool {
		body := scrape(t, metricsURL)
		return strings.Contains(body, `sluice_outbox_rows_pending{table="outbox",destination="queue:loyalty"} 0`) &&
			strings.Contains(body, `sluice_outbox_oldest_unsent_age_seconds{table="outbox",destination="queue:loyalty"} 0`)
	})
	relay.Stop()
	stopConsumer()
	<-consumed

	if got := loyalty.points(t); got != "101=10 102=5 103=20 104=8 105=12" {
		t.Fatalf("points %q, want 101=10 102=5 103=20 104=8 105=12", got)
	}
	if d, s := loyalty.deliveries(), loyalty.skipped(); d != 6 || s != 1 || loyalty.appliedCount("evt-b") != 1 {
		t.Fatalf("%d deliveries, %d skipped as repeats, evt-b applied %d times; want 6, 1 (evt-b published twice), once",
			d, s, loyalty.appliedCount("evt-b"))
	}
}

func openPG(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, stmt string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// checkout is the producer: the order and its event commit together.
func checkout(t *testing.T, db *sql.DB, event string, order, points int) {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(), `INSERT INTO orders (id, points) VALUES ($1, $2)`, order, points); err != nil {
		t.Fatal(err)
	}
	payload := fmt.Sprintf(`{"order_id":%d,"points":%d}`, order, points)
	if _, err := tx.ExecContext(t.Context(), `INSERT INTO outbox (event_id, msg_key, payload) VALUES ($1, $2, $3)`,
		event, fmt.Sprint(order), []byte(payload)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func writeRelayConfig(t *testing.T, dsn string, extra ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "relay.yaml")
	cfg := fmt.Sprintf("driver: postgres\ndsn: %q\nqueue: loyalty\ninterval: 10ms\nmetrics_addr: 127.0.0.1:0\n", dsn)
	if err := os.WriteFile(p, []byte(cfg+strings.Join(extra, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// loyalty is the seed's consumer: points per order, deduplicated by the
// inbox that commits with them.
type loyalty struct {
	db *sql.DB
	in *inbox.Inbox

	mu               sync.Mutex
	delivered, skips int
	appliedPerEvent  map[string]int
	lastErr          error
}

func newLoyalty(t *testing.T, db *sql.DB) *loyalty {
	t.Helper()
	mustExec(t, db, `CREATE TABLE points (order_id INT PRIMARY KEY, n INT NOT NULL)`)
	in, err := inbox.New(db, inbox.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &loyalty{db: db, in: in, appliedPerEvent: map[string]int{}}
}

func (l *loyalty) consume(ctx context.Context, c *client.Client, queue string) {
	for ctx.Err() == nil {
		msgs, err := c.Receive(ctx, queue, client.MaxMessages(10), client.Wait(100*time.Millisecond))
		if err != nil {
			sleep(ctx, 50*time.Millisecond) // the broker is down: try again
			continue
		}
		for _, m := range msgs {
			var ev struct {
				OrderID int `json:"order_id"`
				Points  int `json:"points"`
			}
			if err := json.Unmarshal(m.GetBody(), &ev); err != nil {
				l.mu.Lock()
				l.lastErr = err
				l.mu.Unlock()
				continue
			}
			applied, err := l.in.Apply(ctx, inbox.EventID(m), func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO points (order_id, n) VALUES ($1, $2)
ON CONFLICT (order_id) DO UPDATE SET n = points.n + EXCLUDED.n`, ev.OrderID, ev.Points)
				return err
			})
			l.mu.Lock()
			if err != nil {
				l.lastErr = err
				l.mu.Unlock()
				continue // not acked: redelivered after the visibility timeout
			}
			l.delivered++
			if applied {
				l.appliedPerEvent[inbox.EventID(m)]++
			} else {
				l.skips++
			}
			l.mu.Unlock()
			_ = c.Ack(ctx, queue, m.GetReceipt())
		}
	}
}

func (l *loyalty) appliedCount(ev string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appliedPerEvent[ev]
}
func (l *loyalty) applied() int    { l.mu.Lock(); defer l.mu.Unlock(); return len(l.appliedPerEvent) }
func (l *loyalty) deliveries() int { l.mu.Lock(); defer l.mu.Unlock(); return l.delivered }
func (l *loyalty) skipped() int    { l.mu.Lock(); defer l.mu.Unlock(); return l.skips }

func (l *loyalty) points(t *testing.T) string {
	t.Helper()
	rows, err := l.db.QueryContext(t.Context(), `SELECT order_id, n FROM points ORDER BY order_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var o, n int
		if err := rows.Scan(&o, &n); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%d=%d", o, n))
	}
	return strings.Join(parts, " ")
}
