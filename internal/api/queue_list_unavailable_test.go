package api_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/broker"
)

// TestListQueuesShowsAnUnavailableQueue: a queue whose settings are damaged in both copies
// cannot be opened (docs/storage.md); the others are served, and a listing shows them all,
// that one with why it is unavailable. Before, the whole listing failed QUEUE_UNAVAILABLE:
// `sluice queue list` and the console's queues page showed nothing.
func TestListQueuesShowsAnUnavailableQueue(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Open(broker.Options{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"qa", "qb"} {
		if _, err := b.CreateQueue(broker.QueueSettings{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	damaged, _ := filepath.Glob(filepath.Join(dir, "queues", "*-qa", "settings*.json"))
	if len(damaged) != 2 {
		t.Fatalf("qa's settings files: %v, want the file and its copy", damaged)
	}
	for _, f := range damaged {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, err = broker.Open(broker.Options{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mux := http.NewServeMux()
	for _, r := range api.New(api.Options{Broker: b, Logger: quiet()}).Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	qs, err := client.New(srv.URL).ListQueues(t.Context(), "")
	if err != nil {
		t.Fatalf("ListQueues with one damaged queue: %v", err)
	}
	if len(qs) != 2 || qs[0].GetName() != "qa" || !strings.Contains(qs[0].GetUnavailable(), "could not be opened") ||
		qs[1].GetName() != "qb" || qs[1].GetUnavailable() != "" || qs[1].GetConfig() == nil {
		t.Fatalf("listed %v", qs)
	}
}
