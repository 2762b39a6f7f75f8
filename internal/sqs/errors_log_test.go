package sqs

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestFailedRequestsLoggedByWhatTheOperatorCanDo: a 500 (the server's fault) is a warning;
// a 503 the client retries (a leader moving, a forward to a dead leader, a full disk:
// each warned of where it happens) is debug, for a failover under load answered hundreds a
// second; a client's own error is not logged.
func TestFailedRequestsLoggedByWhatTheOperatorCanDo(t *testing.T) {
	b, err := broker.Open(broker.Options{Dir: "/logs", FS: vfs.NewMem(), HeadroomBytes: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, tc := range []struct {
		name   string
		err    error
		status int
		level  string // "" : nothing logged
	}{
		{"an internal failure", errors.New("index out of range"), 500, "WARN"},
		{"not the leader", fmt.Errorf("queue jobs: %w", broker.ErrNotLeader), 503, "DEBUG"},
		{"a forward to a dead leader", newError(errUnavailable, "forwarding to node 2: connection refused"), 503, "DEBUG"},
		{"a full disk", broker.ErrStorageFull, 503, "DEBUG"},
		{"no such queue", broker.ErrQueueNotFound, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			h := NewHandler(b, Config{AdvertisedURL: "http://sqs.test",
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			rec := httptest.NewRecorder()
			h.writeError(rec, &call{json: true, action: "SendMessage"}, tc.err)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			got := logs.String()
			switch {
			case tc.level == "" && got != "":
				t.Fatalf("logged %q for a client's error", got)
			case tc.level != "" && (strings.Count(got, "\n") != 1 || !strings.Contains(got, "level="+tc.level) || !strings.Contains(got, "action=SendMessage")):
				t.Fatalf("logged %q, want one %s line naming the action", got, tc.level)
			}
		})
	}
}
