package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// soak is how long the kill loop runs: two seconds in CI,
// SLUICE_OUTBOX_SOAK=1m (1,000 orders/s) by hand.
func soak(t *testing.T) (d time.Duration, perSecond int) {
	if s := os.Getenv("SLUICE_OUTBOX_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SLUICE_OUTBOX_SOAK: %v", err)
		}
		return d, 1000
	}
	return 2 * time.Second, 200
}

// Two relays and the broker, all real processes, are SIGKILLed at random
// while checkout commits orders; afterwards every order has exactly one
// applied effect in the consumer's database, the repeats the inbox skipped
// are within what the kills explain, and the relays' backlog metrics are
// back to zero. Both modes.
func TestKillLoopEveryOrderAppliedOnce(t *testing.T) {
	for _, mode := range []string{"polling", "cdc"} {
		t.Run(mode, func(t *testing.T) { killLoop(t, mode) })
	}
}

func killLoop(t *testing.T, mode string) {
	dur, rate := soak(t)
	bin := sluiceBin(t)
	ctx := t.Context()
	port := freePort(t)
	brokerURL := "http://127.0.0.1:" + port
	dataDir := t.TempDir()
	startBroker := func() *testproc.Proc {
		p := testproc.Serve(t, bin, "--data-dir", dataDir, "--http-addr", "127.0.0.1:"+port, "--kafka-addr", "", "--sqs-addr", "")
		p.Addr("http")
		waitFor(t, "the broker to be ready", func() bool {
			resp, err := http.Get(brokerURL + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		return p
	}
	broker := startBroker()
	c := client.New(brokerURL)
	// A short lease: a delivery whose ack died with the broker comes back
	// within the test.
	if _, err := c.CreateQueue(ctx, "loyalty", &client.QueueConfig{VisibilityTimeout: durationpb.New(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}

	dsn := dbs.Postgres(t)
	app := openPG(t, dsn)
	if err := Migrate(ctx, app, "postgres", "outbox"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, app, `CREATE TABLE orders (id INT PRIMARY KEY, points INT NOT NULL)`)
	extra := []string{"batch: 50"}
	slot := fmt.Sprintf("kill%d", cdcSlots.Add(1))
	if mode == "cdc" {
		extra = append(extra, "mode: cdc", "slot: "+slot, "publication: "+slot)
	}
	if mode == "cdc" {
		dropSlotAtCleanup(t, app, slot)
	}
	cfgPath := writeRelayConfig(t, dsn, extra...)
	startRelay := func() *testproc.Proc {
		return testproc.Run(t, bin, "outbox", "relay", "--config", cfgPath, "--server", brokerURL, "--log-format", "json")
	}
	// Two relays at once: in polling mode they share the table (SKIP
	// LOCKED); in CDC mode one streams from the slot and the other retries
	// until the slot is free, a standby.
	relays := []*testproc.Proc{startRelay(), startRelay()}
	for _, r := range relays {
		r.Addr("metrics")
	}
	if mode == "cdc" {
		// The slot exists once the relay is up: rows before it are not in
		// its stream.
		// Its own slot: other tests' slots live on the same server.
		waitFor(t, "the relay's slot", func() bool {
			var n int
			_ = app.QueryRowContext(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&n)
			return n == 1
		})
	}

	loyalty := newLoyalty(t, openPG(t, dbs.Postgres(t)))
	cctx, stopConsumer := context.WithCancel(ctx)
	var consumers sync.WaitGroup
	consumers.Go(func() { loyalty.consume(cctx, c, "loyalty") })

	// Checkout: orders at rate per second for dur, from 4 writers (one
	// commit's latency would cap a single writer below the rate).
	var produced, next atomic.Int64
	var producers sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	end := time.Now().Add(dur)
	for range 4 {
		producers.Go(func() {
			for time.Now().Before(end) {
				<-tick.C
				i := int(next.Add(1))
				checkoutQuiet(ctx, app, fmt.Sprintf("evt-%d", i), i, i%13+1)
				produced.Add(1)
			}
		})
	}

	// Chaos: every 100-400 ms kill the relay (mostly) or the broker.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	kills := map[string]int{}
	for end := time.Now().Add(dur); time.Now().Before(end); {
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		if rng.IntN(10) < 7 {
			i := rng.IntN(len(relays))
			relays[i].Kill()
			relays[i] = startRelay()
			kills["relay"]++
		} else {
			broker.Kill()
			broker = startBroker()
			kills["broker"]++
		}
	}
	producers.Wait()
	tick.Stop()
	n := int(produced.Load())
	if !waitUntil(60*time.Second, func() bool { return loyalty.applied() == n }) {
		var missing []string
		for i := 1; i <= n && len(missing) < 20; i++ {
			if loyalty.appliedCount(fmt.Sprintf("evt-%d", i)) == 0 {
				missing = append(missing, fmt.Sprintf("evt-%d", i))
			}
		}
		var slotState string
		_ = app.QueryRowContext(ctx, `SELECT slot_name || ' active=' || active || ' confirmed=' || confirmed_flush_lsn || ' current=' || pg_current_wal_lsn() FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&slotState)
		t.Fatalf("%d of %d orders applied; missing %v; slot %s; kills %v\nrelay log:\n%s", loyalty.applied(), n, missing, slotState, kills, relays[0].Logs()+"\n"+relays[1].Logs())
	}
	for _, r := range relays {
		url := "http://" + r.Addr("metrics") + "/metrics"
		waitFor(t, "the relays' backlog metrics at zero", func() bool {
			return containsAll(scrape(t, url), `sluice_outbox_rows_pending{table="outbox",destination="queue:loyalty"} 0`,
				`sluice_outbox_oldest_unsent_age_seconds{table="outbox",destination="queue:loyalty"} 0`)
		})
	}
	stopConsumer()
	consumers.Wait()
	for _, r := range relays {
		r.Stop()
	}
	broker.Stop()

	want := map[int]int{}
	for i := 1; i <= n; i++ {
		want[i] = i%13 + 1
	}
	got := loyalty.pointsMap(t)
	for id, p := range want {
		if got[id] != p {
			t.Fatalf("order %d has %d points, want %d (one applied effect)", id, got[id], p)
		}
	}
	if len(got) != n {
		t.Fatalf("%d orders with points, want %d", len(got), n)
	}
	// Repeats are bounded: a relay's death republishes at most its batch;
	// a broker's, the batch each relay had in flight and the deliveries
	// whose acks it lost (the consumer holds up to 10).
	if bound := kills["relay"]*50 + kills["broker"]*(len(relays)*50+10); loyalty.skipped() > bound {
		t.Fatalf("%d repeats after kills %v, more than the %d they can explain", loyalty.skipped(), kills, bound)
	}
	t.Logf("%s: %d orders, two relays, kills %v, %d deliveries, %d repeats skipped by the inbox", mode, n, kills, loyalty.deliveries(), loyalty.skipped())
}

// checkoutQuiet is checkout for a goroutine: a failure is retried (the
// database is never killed here, so it does not fail).
func checkoutQuiet(ctx context.Context, db *sql.DB, event string, order, points int) {
	for ctx.Err() == nil {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			continue
		}
		_, err1 := tx.ExecContext(ctx, `INSERT INTO orders (id, points) VALUES ($1, $2)`, order, points)
		_, err2 := tx.ExecContext(ctx, `INSERT INTO outbox (event_id, msg_key, payload) VALUES ($1, $2, $3)`,
			event, strconv.Itoa(order), fmt.Appendf(nil, `{"order_id":%d,"points":%d}`, order, points))
		if err1 == nil && err2 == nil && tx.Commit() == nil {
			return
		}
		_ = tx.Rollback()
	}
}

func (l *loyalty) pointsMap(t *testing.T) map[int]int {
	t.Helper()
	rows, err := l.db.QueryContext(t.Context(), `SELECT order_id, n FROM points`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[int]int{}
	for rows.Next() {
		var o, n int
		if err := rows.Scan(&o, &n); err != nil {
			t.Fatal(err)
		}
		m[o] = n
	}
	return m
}

// freePort is the broker's port across its kill loop (testproc.StableAddr: no outgoing
// connection takes it while the broker is down).
func freePort(t *testing.T) string {
	_, p, _ := net.SplitHostPort(testproc.StableAddr(t))
	return p
}

func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
