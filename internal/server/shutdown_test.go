package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// In-flight requests finish before closers run; closers run in reverse
// registration order; Wait returns nil.
func TestGracefulShutdownDrainsThenCloses(t *testing.T) {
	s, _ := newTestServer(t, testConfig(t))
	entered, release := make(chan struct{}), make(chan struct{})
	s.RegisterHTTP("GET /slow", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	}))
	var mu sync.Mutex
	var order []string
	for _, name := range []string{"broker", "frontend-state"} {
		s.OnClose(name, func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
			return nil
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}

	type result struct {
		body string
		err  error
	}
	resc := make(chan result, 1)
	go func() { // owned by the test: joined by reading resc
		resp, err := http.Get("http://" + s.Addr(HTTP) + "/slow")
		if err != nil {
			resc <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		resc <- result{string(b), err}
	}()
	<-entered

	waited := make(chan error, 1)
	cancel()
	go func() { waited <- s.Wait(ctx) }() // joined by reading waited
	<-s.Draining()
	if s.Ready() {
		t.Error("still ready while draining")
	}
	mu.Lock()
	if len(order) != 0 {
		t.Errorf("closers ran before the in-flight request finished: %v", order)
	}
	mu.Unlock()

	close(release)
	if r := <-resc; r.err != nil || r.body != "done" {
		t.Fatalf("in-flight request: body %q, err %v; want it to complete", r.body, r.err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	if want := []string{"frontend-state", "broker"}; !slices.Equal(order, want) {
		t.Errorf("close order %v, want %v", order, want)
	}
}

// A handler that ignores shutdown is cut off at the timeout (its context is
// cancelled) and the closers still run.
func TestShutdownTimeoutCutsOffStragglers(t *testing.T) {
	cfg := testConfig(t)
	cfg.ShutdownTimeout = 50 * time.Millisecond
	s, _ := newTestServer(t, cfg)
	entered, cutOff := make(chan struct{}), make(chan struct{})
	s.RegisterHTTP("GET /stuck", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		close(cutOff)
	}))
	closed := make(chan struct{})
	s.OnClose("broker", func(context.Context) error { close(closed); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clientDone := make(chan struct{})
	go func() { // joined via clientDone
		defer close(clientDone)
		if resp, err := http.Get("http://" + s.Addr(HTTP) + "/stuck"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	<-cutOff
	<-closed
	<-clientDone
}

func TestCloserErrorIsReturned(t *testing.T) {
	s, _ := newTestServer(t, testConfig(t))
	boom := errors.New("sync failed")
	s.OnClose("broker", func(context.Context) error { return boom })
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.Wait(ctx); !errors.Is(err, boom) {
		t.Fatalf("Wait = %v, want the closer's error", err)
	}
}

// A long-poll handler that watches Draining answers at once when shutdown
// begins instead of holding it up for its full wait.
func TestDrainingEndsLongPolls(t *testing.T) {
	s, _ := newTestServer(t, testConfig(t))
	entered := make(chan struct{})
	s.RegisterHTTP("GET /poll", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-s.Draining():
			io.WriteString(w, "empty: shutting down")
		case <-r.Context().Done():
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	bodyc := make(chan string, 1)
	go func() { // joined by reading bodyc
		resp, err := http.Get("http://" + s.Addr(HTTP) + "/poll")
		if err != nil {
			bodyc <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		bodyc <- string(b)
	}()
	<-entered
	cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-bodyc; got != "empty: shutting down" {
		t.Fatalf("long poll answered %q", got)
	}
}

// TestHandOffsRunWhileListenersServe: a BeforeDrain function runs when shutdown begins,
// with /readyz already 503 "shutting down" but every listener still answering new
// requests, and before Draining closes and before any closer; a failing one is logged
// and the stop goes on; all of them share one ShutdownTimeout.
func TestHandOffsRunWhileListenersServe(t *testing.T) {
	cfg := testConfig(t)
	cfg.ShutdownTimeout = 2 * time.Second
	s, _ := newTestServer(t, cfg)
	s.RegisterHTTP("GET /hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }))
	var order []string
	s.OnClose("broker", func(context.Context) error { order = append(order, "closer"); return nil })
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + s.Addr(HTTP) + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	s.BeforeDrain("first", func(ctx context.Context) error {
		select {
		case <-s.Draining():
			t.Error("Draining closed before the hand-off")
		default:
		}
		if code, body := get("/hello"); code != http.StatusOK || body != "hello" {
			t.Errorf("during the hand-off a new request got %d %q; want it served", code, body)
		}
		if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body != "shutting down\n" {
			t.Errorf("during the hand-off /readyz answered %d %q", code, body)
		}
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > cfg.ShutdownTimeout {
			t.Errorf("hand-off context deadline %v, %v: want within ShutdownTimeout", d, ok)
		}
		order = append(order, "first")
		return errors.New("no replica took it")
	})
	s.BeforeDrain("second", func(context.Context) error { order = append(order, "second"); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait = %v: a failed hand-off must not fail the stop", err)
	}
	if want := []string{"first", "second", "closer"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}
