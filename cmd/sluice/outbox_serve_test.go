package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/client/inbox"
	"github.com/sluice-mq/sluice/internal/outbox"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// `sluice serve --outbox-config FILE` runs the relay beside the broker: on
// a fresh broker it waits for its queue to be created, then relays the
// SQLite outbox's rows through the broker's own HTTP listener; SIGTERM
// stops both with exit 0.
func TestServeRunsOutboxRelay(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "app.db")
	db, err := outbox.Open(outbox.Config{Driver: "sqlite", DSN: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := outbox.Migrate(t.Context(), db, "sqlite", "outbox"); err != nil {
		t.Fatal(err)
	}
	insert := func(id string) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), `INSERT INTO outbox (event_id, payload) VALUES (?, ?)`, id, []byte("body "+id)); err != nil {
			t.Fatal(err)
		}
	}
	insert("evt-1")
	cfg := filepath.Join(dir, "relay.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "driver: sqlite\ndsn: %q\nqueue: emails\ninterval: 10ms\n", dbPath), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := testproc.Serve(t, bin, "--data-dir", filepath.Join(dir, "data"), "--http-addr", addr,
		"--kafka-addr", "", "--sqs-addr", "", "--outbox-config", cfg)
	base := "http://" + p.Addr("http")
	// "listening" comes before the API is mounted; /readyz says when.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not ready:\n%s", p.Logs())
		}
	}
	c := client.New(base)
	if _, err := c.CreateQueue(t.Context(), "emails", nil); err != nil {
		t.Fatal(err)
	}
	insert("evt-2")
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		msgs, err := c.Receive(t.Context(), "emails", client.MaxMessages(10), client.Wait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got = append(got, inbox.EventID(m))
		}
	}
	if fmt.Sprint(got) != "[evt-1 evt-2]" {
		t.Fatalf("received %v, want [evt-1 evt-2]\n%s", got, p.Logs())
	}
	// The relay marks a row sent once the broker acknowledged it, which can come after a
	// consumer already received the message: wait for the marks, bounded.
	var unsent int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent)
		if err == nil && unsent == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows unsent 10 s after both were received (%v)", unsent, err)
		}
	}
	p.Stop()
}

// A relay config that cannot reach this broker (no server:, --http-addr
// on port 0) fails the start with one line, before the broker opens.
func TestServeOutboxConfigNeedsAnAddress(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(cfg, []byte("driver: sqlite\ndsn: x.db\nqueue: q\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	root.SetArgs([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--kafka-addr", "", "--sqs-addr", "", "--outbox-config", cfg})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "fixed --http-addr port") {
		t.Fatalf("serve: %v, want the relay's address error", err)
	}
}
