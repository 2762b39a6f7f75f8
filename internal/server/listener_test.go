package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/metrics"

	"github.com/sluice-mq/sluice/internal/testlog"
)

// At its cap a listener refuses the next connection at once: an HTTP
// listener with a 503 and a close, Kafka with a close; the refusal is
// counted and logged, the connections already open keep working, and a
// slot freed by a close is taken by the next client.
func TestConnectionCapRefusesTheNext(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPMaxConnections, cfg.KafkaMaxConnections = 2, 1
	s, logs := newTestServer(t, cfg)
	kafka := &fakeFrontend{served: make(chan net.Listener, 1), accepted: make(chan net.Conn, 4)}
	s.RegisterFrontend(Kafka, kafka)
	start(t, s)
	<-kafka.served

	// HTTP: two keep-alive connections hold both slots.
	held := []*rawHTTP{dialHTTP(t, s.Addr(HTTP)), dialHTTP(t, s.Addr(HTTP))}
	for _, c := range held {
		if status := c.get(t, "/healthz"); status != http.StatusOK {
			t.Fatalf("held connection: %d", status)
		}
	}
	refused := dialHTTP(t, s.Addr(HTTP))
	resp, err := http.ReadResponse(refused.br, nil) // answered before it asked
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
		t.Fatalf("over the cap: %v %+v, want 503 with Connection: close", err, resp)
	}
	io.Copy(io.Discard, resp.Body)
	if _, err := refused.br.ReadByte(); err != io.EOF {
		t.Errorf("refused connection not closed: %v", err)
	}
	if status := held[0].get(t, "/readyz"); status != http.StatusOK {
		t.Errorf("held connection after a refusal: %d", status)
	}
	held[1].nc.Close()
	waitFor(t, "the server to see the close", func() bool {
		return metricValue(t, s.Metrics(), "sluice_connections_open", "http") == 1
	})
	if status := dialHTTP(t, s.Addr(HTTP)).get(t, "/healthz"); status != http.StatusOK {
		t.Errorf("new client after a slot was freed: %d", status)
	}

	// Kafka: the second connection is closed without a word.
	k1, err := net.Dial("tcp", s.Addr(Kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer k1.Close()
	defer (<-kafka.accepted).Close()
	k2, err := net.Dial("tcp", s.Addr(Kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	_ = k2.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := k2.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("kafka connection over the cap: read %d, %v, want EOF", n, err)
	}

	for _, m := range []struct {
		name, listener string
		want           float64
	}{
		{"sluice_connections_refused_total", "http", 1}, {"sluice_connections_refused_total", "kafka", 1},
		{"sluice_connections_open", "kafka", 1},
	} {
		if got := metricValue(t, s.Metrics(), m.name, m.listener); got != m.want {
			t.Errorf("%s{listener=%q} = %v, want %v", m.name, m.listener, got, m.want)
		}
	}
	if !strings.Contains(logs.String(), "listener at its connection limit") {
		t.Errorf("refusal not logged:\n%s", logs.String())
	}
}

// Out of descriptors, accept fails with EMFILE until one is freed. The
// listener backs off and retries instead of ending Serve (which would take
// the listener down for good) or spinning; it logs once per episode and
// counts every failure.
func TestAcceptBacksOffWhileOutOfDescriptors(t *testing.T) {
	logs := &testlog.Buffer{}
	m := metrics.New("test")
	fake := &failingListener{fails: 4, err: &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}}
	ln := newGuardedListener(fake, "kafka", 10, nil, m.Listener("kafka"), slog.New(slog.NewTextHandler(logs, nil)))
	begin := time.Now()
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept = %v, want the connection after the failures", err)
	}
	c.Close()
	// 5+10+20+40 ms of backoff: it waited, but not long.
	if took := time.Since(begin); took < 70*time.Millisecond || took > 2*time.Second {
		t.Errorf("accept took %s through 4 failures, want about 75ms", took)
	}
	if got := metricValue(t, m, "sluice_accept_errors_total", "kafka"); got != 4 {
		t.Errorf("accept errors counted: %v, want 4", got)
	}
	if n := strings.Count(logs.String(), "accept failing"); n != 1 {
		t.Errorf("logged the episode %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "accepting again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}

	// Close interrupts a backoff, and Accept reports the close.
	fake.set(1<<30, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.ENFILE})
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	time.Sleep(20 * time.Millisecond)
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not interrupt the backoff")
	}
}

// The guard's connection still offers what front-ends look for on a TCP
// connection: Kafka's sendfile needs SyscallConn.
func TestGuardedConnKeepsTheDescriptor(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newGuardedListener(raw, "kafka", 0, nil, nil, slog.New(slog.DiscardHandler))
	defer ln.Close()
	go func() {
		if c, err := net.Dial("tcp", raw.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatal("guarded connection is not a syscall.Conn: sendfile would fall back to copying")
	}
	if _, err := sc.SyscallConn(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(io.ReaderFrom); !ok {
		t.Error("guarded connection is not an io.ReaderFrom")
	}
}

// failingListener fails Accept fails times with err, then returns one end
// of a pipe; after Close it returns net.ErrClosed.
type failingListener struct {
	mu     sync.Mutex
	fails  int
	err    error
	closed bool
}

func (f *failingListener) set(fails int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails, f.err = fails, err
}

func (f *failingListener) Accept() (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, net.ErrClosed
	}
	if f.fails > 0 {
		f.fails--
		return nil, f.err
	}
	c, _ := net.Pipe()
	return c, nil
}
func (f *failingListener) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}
func (f *failingListener) Addr() net.Addr { return &net.TCPAddr{} }

// rawHTTP is one HTTP/1.1 connection driven by hand.
type rawHTTP struct {
	nc net.Conn
	br *bufio.Reader
}

func dialHTTP(t *testing.T, addr string) *rawHTTP {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawHTTP{nc: nc, br: bufio.NewReader(nc)}
}

// get asks for path on the connection, keeping it open; 0 if it failed.
func (c *rawHTTP) get(t *testing.T, path string) int {
	if _, err := fmt.Fprintf(c.nc, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// metricValue scrapes m and returns the value of name{listener=...}.
func metricValue(t *testing.T, m *metrics.Metrics, name, listener string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	prefix := fmt.Sprintf("%s{listener=%q} ", name, listener)
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s{listener=%q} in the scrape", name, listener)
	return 0
}

// Refusals are logged at once, then at most every refusalLogEvery with the
// count since the last line: a flood must not flood the log.
func TestRefusalLogIsRateLimited(t *testing.T) {
	logs := &testlog.Buffer{}
	ln := newGuardedListener(&failingListener{}, "kafka", 1, nil, nil, slog.New(slog.NewTextHandler(logs, nil)))
	now := time.Unix(1000, 0)
	ln.now = func() time.Time { return now }
	for _, step := range []time.Duration{0, time.Second, time.Second, refusalLogEvery} {
		now = now.Add(step)
		ln.logRefusal()
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "refused=1") || !strings.Contains(lines[1], "refused=3") {
		t.Errorf("want 2 lines, refused=1 then refused=3:\n%s", logs.String())
	}
}
