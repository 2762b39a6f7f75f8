package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testlog"
)

func testConfig(t *testing.T) Config {
	cfg := Defaults()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.SQSAddr = "127.0.0.1:0"
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

func newTestServer(t *testing.T, cfg Config) (*Server, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	s, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)), "test")
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// start starts s and returns a stop func that cancels and waits, failing the
// test if shutdown is not clean. Tests that check shutdown themselves use
// Start/Wait directly.
func start(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Wait(ctx); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestReadyOnlyAfterSetup(t *testing.T) {
	s, _ := newTestServer(t, testConfig(t))
	inSetup, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() { // owned by this test: joined by reading started below
		started <- s.Start(ctx, func(_ context.Context, s *Server) error {
			close(inSetup)
			<-release
			s.RegisterHTTP("GET /api/thing", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, "thing")
			}))
			return nil
		})
	}()
	<-inSetup
	base := "http://" + s.Addr(HTTP)
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz during recovery = %d, want 200", code)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("readyz during recovery = %d, want 503", code)
	}
	// A client that comes before the API is mounted is told to retry, not that the
	// route does not exist (a 404 is "unimplemented" to a Connect client, never retried).
	resp, err := http.Get(base + "/api/thing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("API route during recovery = %d (Retry-After %q), want 503 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("readyz after recovery = %d, want 200", code)
	}
	if code, body := get(t, base+"/api/thing"); code != http.StatusOK || body != "thing" {
		t.Errorf("API route after recovery = %d %q, want 200", code, body)
	}
	if code, _ := get(t, base+"/api/nothing"); code != http.StatusNotFound {
		t.Errorf("unknown route after recovery = %d, want 404", code)
	}
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, `sluice_build_info{version="test"} 1`) {
		t.Errorf("metrics = %d, body lacks build info:\n%s", code, body)
	}
	cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPanickingHandlerAnswers500AndServerLives(t *testing.T) {
	s, logs := newTestServer(t, testConfig(t))
	s.RegisterHTTP("GET /boom", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("handler bug")
	}))
	start(t, s)
	base := "http://" + s.Addr(HTTP)
	for range 2 { // twice: the first panic must not have broken anything
		if code, _ := get(t, base+"/boom"); code != http.StatusInternalServerError {
			t.Fatalf("panicking handler answered %d, want 500", code)
		}
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz after panic = %d", code)
	}
	if !strings.Contains(logs.String(), "handler panicked") || !strings.Contains(logs.String(), "handler bug") {
		t.Errorf("panic not logged:\n%s", logs.String())
	}
}

func TestRequestBodyLimit(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxRequestBytes = 16
	s, _ := newTestServer(t, cfg)
	s.RegisterHTTP("POST /echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		w.Write(b)
	}))
	start(t, s)
	url := "http://" + s.Addr(HTTP) + "/echo"
	for _, tc := range []struct {
		body string
		want int
	}{{"small", http.StatusOK}, {strings.Repeat("x", 17), http.StatusRequestEntityTooLarge}} {
		resp, err := http.Post(url, "text/plain", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("body of %d bytes: status %d, want %d", len(tc.body), resp.StatusCode, tc.want)
		}
	}
}

// fakeFrontend records what the server does with it. With accepted set,
// it keeps the connections open and sends each on it; else it closes them.
type fakeFrontend struct {
	served   chan net.Listener
	accepted chan net.Conn
	shutdown atomic.Bool
	ln       net.Listener
}

func (f *fakeFrontend) Serve(ln net.Listener) error {
	f.ln = ln
	f.served <- ln
	for { // accept until the listener is closed by Shutdown
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		if f.accepted == nil {
			c.Close()
			continue
		}
		f.accepted <- c
	}
}

func (f *fakeFrontend) Shutdown(context.Context) error {
	f.shutdown.Store(true)
	return f.ln.Close()
}

func TestFrontendListenersOnlyWhenRegistered(t *testing.T) {
	s, logs := newTestServer(t, testConfig(t))
	kafka := &fakeFrontend{served: make(chan net.Listener, 1)}
	s.RegisterFrontend(Kafka, kafka)
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ln := <-kafka.served
	if got := s.Addr(Kafka); got == "" || got != ln.Addr().String() {
		t.Errorf("Addr(kafka) = %q, want the served listener %s", got, ln.Addr())
	}
	if got := s.Addr(SQS); got != "" {
		t.Errorf("Addr(sqs) = %q, want empty: no SQS front-end registered", got)
	}
	if !strings.Contains(logs.String(), "listener=sqs") || !strings.Contains(logs.String(), "front-end is not built yet") {
		t.Errorf("missing log about the unstarted SQS listener:\n%s", logs.String())
	}
	cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !kafka.shutdown.Load() {
		t.Error("front-end not shut down")
	}
}

func TestAdvertisedAddr(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPAdvertisedAddr = "broker.example:80"
	s, _ := newTestServer(t, cfg)
	start(t, s)
	if got := s.AdvertisedAddr(HTTP); got != "broker.example:80" {
		t.Errorf("AdvertisedAddr(http) = %q", got)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s.mu.Lock()
	s.listeners[SQS] = ln // pretend an SQS listener is bound
	s.mu.Unlock()
	if got := s.AdvertisedAddr(SQS); got != s.Addr(SQS) || got == "" {
		t.Errorf("AdvertisedAddr(sqs) = %q, want the bound address %q", got, s.Addr(SQS))
	}
}

func TestSetupErrorStopsStart(t *testing.T) {
	s, _ := newTestServer(t, testConfig(t))
	closed := false
	err := s.Start(context.Background(), func(_ context.Context, s *Server) error {
		s.OnClose("half-open broker", func(context.Context) error { closed = true; return nil })
		return errors.New("corrupt journal")
	})
	if err == nil || !strings.Contains(err.Error(), "corrupt journal") {
		t.Fatalf("Start = %v, want the setup error", err)
	}
	if !closed {
		t.Error("closer registered before the failure did not run")
	}
	if _, err := net.Dial("tcp", s.Addr(HTTP)); err == nil {
		t.Error("HTTP listener still accepting after failed Start")
	}
}

// gRPC clients speak HTTP/2 without TLS; the HTTP listener must accept it.
func TestHTTPListenerSpeaksCleartextHTTP2(t *testing.T) {
	s, _ := newTestServer(t, testConfig(t))
	start(t, s)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + s.Addr(HTTP) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
		t.Fatalf("got %s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
	}
}
