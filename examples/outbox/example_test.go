package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/sluicetest"

	"github.com/sluice-mq/sluice/internal/testlog"
)

var dbs testproc.Databases

func TestMain(m *testing.M) {
	code := m.Run()
	dbs.Stop()
	os.Exit(code)
}

// The README's walk-through, run: setup, three orders, the real relay
// binary, and the worker sends one email per order, also for an event the
// relay publishes a second time.
func TestExampleWalkThrough(t *testing.T) {
	dsn := dbs.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "emails", nil); err != nil {
		t.Fatal(err)
	}
	var out testlog.Buffer
	if err := run(ctx, "setup", db, c, "emails", 0, &out); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, "checkout", db, c, "emails", 3, &out); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "driver: postgres\ndsn: %q\nqueue: emails\n", dsn), 0o600); err != nil {
		t.Fatal(err)
	}
	relay := testproc.Run(t, testproc.Build(t, t.TempDir()), "outbox", "relay", "--config", cfg, "--server", srv.URL, "--log-format", "json")
	defer relay.Stop()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(wctx, "worker", db, c, "emails", 0, &out) }()
	// The relay's republish after a crash, by hand: the same event again.
	if _, err := c.Send(ctx, "emails", []byte(`{"order_id":2,"email":"shopper@example.com","cents":4200}`),
		client.WithAttribute("event-id", "String", []byte("order-2-placed"))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), "email to") < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // room for a wrong fourth email
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if n := strings.Count(out.String(), fmt.Sprintf("order %d confirmed", i)); n != 1 {
			t.Errorf("order %d: %d emails, want 1\n%s", i, n, out.String())
		}
	}
}
