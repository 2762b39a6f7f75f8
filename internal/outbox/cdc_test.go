package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/client/inbox"
)

// cdcSlots numbers the tests' slots: a slot belongs to the whole server,
// and every test has a database of its own.
var cdcSlots atomic.Int32

func newCDCEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, drivers[0], Config{Mode: "cdc", Queue: "q", Slot: fmt.Sprintf("slot%d", cdcSlots.Add(1))})
	if _, err := e.c.CreateQueue(t.Context(), "q", nil); err != nil {
		t.Fatal(err)
	}
	dropSlotAtCleanup(t, e.db, e.cfg.Slot)
	return e
}

// dropSlotAtCleanup drops a test's slot when it ends: a slot keeps WAL, and
// the server has only max_replication_slots of them. A relay still
// streaming from it (a test that failed early) is disconnected first.
func dropSlotAtCleanup(t *testing.T, db *sql.DB, slot string) {
	t.Cleanup(func() {
		ctx := context.Background()
		for range 50 {
			_, _ = db.ExecContext(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot)
			var n int
			if db.QueryRowContext(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&n) != nil || n == 0 {
				return
			}
			_, _ = db.ExecContext(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func (e *env) cdc(t *testing.T) *CDC {
	t.Helper()
	pub, err := NewPublisher(t.Context(), e.c, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewCDC(e.cfg, e.db, pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// run starts r.Run and returns its stop.
func run(t *testing.T, r interface{ Run(context.Context) error }) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	return func() { cancel(); wg.Wait() }
}

// CDC publishes in commit order (the larger id, committed first, goes
// first), and relays a row the application deleted in the transaction that
// inserted it: the WAL keeps the event. The slot is confirmed past them.
func TestCDCCommitOrderAndDeletedRows(t *testing.T) {
	e := newCDCEnv(t)
	r := e.cdc(t)
	stop := run(t, r)
	defer stop()
	ctx := t.Context()
	slow, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback()
	e.insert(t, slow, "evt-small", "k1", "first id", `{"type":"a"}`)
	e.insert(t, e.db, "evt-large", "", "second id", "")
	if err := slow.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.insert(t, tx, "evt-gone", "", "deleted at once", "")
	if _, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE event_id = 'evt-gone'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var msgs []*client.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(msgs) < 3 && time.Now().Before(deadline) {
		got, err := e.c.Receive(ctx, "q", client.MaxMessages(10), client.Wait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, got...)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, inbox.EventID(m))
	}
	if !slices.Equal(ids, []string{"evt-large", "evt-small", "evt-gone"}) {
		t.Fatalf("delivered %v, want commit order evt-large, evt-small, evt-gone", ids)
	}
	if m := msgs[1]; string(m.GetBody()) != "first id" || string(m.GetAttributes()["type"].GetValue()) != "a" {
		t.Fatalf("evt-small: body %q attributes %v", m.GetBody(), m.GetAttributes())
	}
	waitFor(t, "the slot to be confirmed past the last commit", func() bool {
		var behind bool
		err := e.db.QueryRowContext(ctx, `SELECT confirmed_flush_lsn < pg_current_wal_lsn() FROM pg_replication_slots WHERE slot_name = $1`, e.cfg.Slot).Scan(&behind)
		return err == nil && !behind
	})
	if r.Metrics().Published() != 3 {
		t.Fatalf("published metric %d, want 3", r.Metrics().Published())
	}
}

// A relay that dies after the broker's ack and before confirming the slot
// gets the same transactions again from the server: published twice, never
// lost. After a clean confirm, a new relay on the slot publishes nothing
// old.
func TestCDCCrashBeforeConfirmReplays(t *testing.T) {
	e := newCDCEnv(t)
	r := e.cdc(t)
	var crashes atomic.Int32
	r.afterPublish = func([]Event) error {
		if crashes.Add(1) == 1 {
			return errors.New("relay died before confirming")
		}
		return nil
	}
	stop := run(t, r)
	tx, err := e.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.insert(t, tx, "evt-a", "", "a", "")
	e.insert(t, tx, "evt-b", "", "b", "")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, e.c, "q", 4)
	stop()
	if !slices.Equal(got, []string{"evt-a", "evt-b", "evt-a", "evt-b"}) {
		t.Fatalf("delivered %v: want the unconfirmed transaction again after the crash", got)
	}
	if r.Metrics().Errors() == 0 {
		t.Fatal("the failed session was not counted")
	}

	r2 := e.cdc(t)
	stop2 := run(t, r2)
	defer stop2()
	e.insert(t, e.db, "evt-c", "", "c", "")
	if got := receiveAll(t, e.c, "q", 1); !slices.Equal(got, []string{"evt-c"}) {
		t.Fatalf("new relay delivered %v, want only evt-c", got)
	}
}

// Two CDC relays on one slot: one streams, the other waits as a standby
// (not counted as failing) and takes over when the first stops.
func TestCDCStandbyTakesOver(t *testing.T) {
	e := newCDCEnv(t)
	r1 := e.cdc(t)
	stop1 := run(t, r1)
	waitFor(t, "the first relay to stream", func() bool {
		var active bool
		_ = e.db.QueryRowContext(t.Context(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, e.cfg.Slot).Scan(&active)
		return active
	})
	r2 := e.cdc(t)
	stop2 := run(t, r2)
	defer stop2()
	e.insert(t, e.db, "evt-a", "", "a", "")
	if got := receiveAll(t, e.c, "q", 1); !slices.Equal(got, []string{"evt-a"}) {
		t.Fatalf("delivered %v", got)
	}
	time.Sleep(1500 * time.Millisecond) // the standby has retried at least once
	if n := r2.Metrics().Errors(); n != 0 {
		t.Fatalf("the standby counted %d errors: the slot in use is its normal state", n)
	}
	stop1()
	e.insert(t, e.db, "evt-b", "", "b", "")
	if got := receiveAll(t, e.c, "q", 1); !slices.Equal(got, []string{"evt-b"}) {
		t.Fatalf("after the active relay stopped, delivered %v, want evt-b from the standby", got)
	}
}
