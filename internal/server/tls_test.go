package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/metrics"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"

	"github.com/sluice-mq/sluice/internal/testlog"
)

// certs is a CA, server certificates it signed (serials 1, 2, 3), a client
// certificate for "billing", and the live files the server reads (serial 1).
type certs struct {
	ca                *tlstest.CA
	one, two, three   tlstest.Pair
	billing           tlstest.Pair
	liveCert, liveKey string
}

func newCerts(t *testing.T) *certs {
	t.Helper()
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed ("+err.Error()+"): apt-get install openssl")
	}
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	c := &certs{ca: ca, liveCert: filepath.Join(dir, "server.crt"), liveKey: filepath.Join(dir, "server.key")}
	for _, p := range []struct {
		to     *tlstest.Pair
		name   string
		serial int64
	}{{&c.one, "broker", 1}, {&c.two, "broker", 2}, {&c.three, "broker", 3}, {&c.billing, "billing", 10}} {
		if *p.to, err = ca.Issue(fmt.Sprintf("%s-%d", p.name, p.serial), p.name, p.serial); err != nil {
			t.Fatal(err)
		}
	}
	if err := tlstest.Install(c.one, c.liveCert, c.liveKey); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *certs) apply(cfg *Config, clientCA bool) {
	cfg.TLSCertFile, cfg.TLSKeyFile = c.liveCert, c.liveKey
	if clientCA {
		cfg.TLSClientCAFile = c.ca.Cert
	}
}

// httpsClient trusts the test CA, presents client if set, and speaks
// HTTP/2 where the server offers it.
func (c *certs) httpsClient(t *testing.T, client tlstest.Pair) *http.Client {
	t.Helper()
	cfg, err := c.ca.ClientConfig(client)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// whoami answers with the request's protocol and its mTLS principal ("-":
// none), as a front-end calling tlsconf.Principal sees them.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, ok := tlsconf.Principal(r.TLS)
	if !ok {
		p = "-"
	}
	fmt.Fprintf(w, "%s %s", r.Proto, p)
})

func body(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape returns the value of one series ("name{labels}") on m, -1 if absent.
func scrape(m *metrics.Metrics, series string) float64 {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// TestHTTPTLSBesidePlaintext: the native API's routes answer on the
// plaintext listener and on its TLS twin (HTTP/2 by ALPN); over TLS a
// client certificate that chains to --tls-client-ca names the principal,
// and a client without one still gets in. Clear text sent to the TLS port
// fails its handshake, and is counted.
func TestHTTPTLSBesidePlaintext(t *testing.T) {
	c := newCerts(t)
	cfg := testConfig(t)
	cfg.HTTPTLSAddr = "127.0.0.1:0"
	c.apply(&cfg, true)
	s, logs := newTestServer(t, cfg)
	s.RegisterHTTP("GET /whoami", whoami)
	start(t, s)

	if code, got := body(t, http.DefaultClient, "http://"+s.Addr(HTTP)+"/whoami"); code != 200 || got != "HTTP/1.1 -" {
		t.Errorf("plaintext: %d %q, want 200 \"HTTP/1.1 -\"", code, got)
	}
	tlsURL := "https://" + s.Addr(HTTPTLS) + "/whoami"
	if code, got := body(t, c.httpsClient(t, tlstest.Pair{}), tlsURL); code != 200 || got != "HTTP/2.0 -" {
		t.Errorf("tls without a client cert: %d %q, want 200 \"HTTP/2.0 -\"", code, got)
	}
	if code, got := body(t, c.httpsClient(t, c.billing), tlsURL); code != 200 || got != "HTTP/2.0 billing" {
		t.Errorf("mutual tls: %d %q, want 200 \"HTTP/2.0 billing\"", code, got)
	}
	if code, got := body(t, c.httpsClient(t, tlstest.Pair{}), "https://"+s.Addr(HTTPTLS)+"/healthz"); code != 200 || got != "ok\n" {
		t.Errorf("healthz over tls: %d %q", code, got)
	}

	if code, got := get(t, "http://"+s.Addr(HTTPTLS)+"/whoami"); code != 400 || !strings.Contains(got, "HTTPS") {
		t.Errorf("a clear-text request to the TLS listener: %d %q, want 400 saying to use HTTPS", code, got)
	}
	waitFor(t, "the handshake error counted", func() bool {
		return scrape(s.Metrics(), `sluice_tls_handshake_errors_total{listener="http-tls"}`) == 1
	})
	if !strings.Contains(logs.String(), "listener=http-tls") || !strings.Contains(logs.String(), "tls=true") {
		t.Errorf("no listening line for http-tls:\n%s", logs.String())
	}
}

// TestTLSHandshakeBoundedAndPrincipalReady: a TLS listener hands its
// front-end only connections whose handshake is done, so a Kafka-style
// front-end reads the principal from the connection at once; a client
// that connects and says nothing is closed at the read-header timeout and
// never reaches the front-end.
func TestTLSHandshakeBoundedAndPrincipalReady(t *testing.T) {
	c := newCerts(t)
	cfg := testConfig(t)
	cfg.KafkaAddr, cfg.KafkaTLSAddr, cfg.ReadHeaderTimeout = "", "127.0.0.1:0", 200*time.Millisecond
	c.apply(&cfg, true)
	s, _ := newTestServer(t, cfg)
	fe := &principalFrontend{conns: make(chan string, 4)}
	s.RegisterFrontend(KafkaTLS, fe)
	start(t, s)

	silent, err := net.Dial("tcp", s.Addr(KafkaTLS))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	began := time.Now()
	if _, err := silent.Read(make([]byte, 1)); err == nil || time.Since(began) > 3*time.Second {
		t.Errorf("a silent client was kept %s (read: %v), want closed after ~200ms", time.Since(began), err)
	}

	cc, err := c.ca.ClientConfig(c.billing)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", s.Addr(KafkaTLS), cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case p := <-fe.conns:
		if p != "billing" {
			t.Errorf("principal %q, want billing", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the front-end got no connection")
	}
	if len(fe.conns) != 0 {
		t.Error("the silent client reached the front-end")
	}
	if n := scrape(s.Metrics(), `sluice_tls_handshake_errors_total{listener="kafka-tls"}`); n != 1 {
		t.Errorf("handshake errors %v, want 1 (the silent client)", n)
	}
}

// principalFrontend reports each connection's principal and closes it.
type principalFrontend struct {
	conns chan string
	mu    sync.Mutex
	ln    net.Listener
}

func (f *principalFrontend) Serve(ln net.Listener) error {
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return err
		}
		p, ok := tlsconf.ConnPrincipal(nc)
		if !ok {
			p = "-"
		}
		f.conns <- p
		nc.Close()
	}
}

func (f *principalFrontend) Shutdown(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ln.Close()
}

// TestMetricsListener: with --metrics-addr, /metrics and health answer
// there and no longer on the API listener.
func TestMetricsListener(t *testing.T) {
	cfg := testConfig(t)
	cfg.MetricsAddr = "127.0.0.1:0"
	s, _ := newTestServer(t, cfg)
	start(t, s)
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _ := get(t, "http://"+s.Addr(Metrics)+path); code != 200 {
			t.Errorf("metrics listener %s: %d, want 200", path, code)
		}
		if code, _ := get(t, "http://"+s.Addr(HTTP)+path); code != 404 {
			t.Errorf("api listener %s: %d, want 404", path, code)
		}
	}
}

// TestInsecureAllowAnonymousWarns: the override is logged at every start,
// naming the exposed listeners.
func TestInsecureAllowAnonymousWarns(t *testing.T) {
	cfg := testConfig(t)
	cfg.KafkaAddr, cfg.InsecureAllowAnonymous = "0.0.0.0:9092", true
	logs := &testlog.Buffer{}
	s, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)), "test")
	if err != nil {
		t.Fatal(err)
	}
	s.warnExposure() // Start's first step; this test binds nothing beyond loopback
	if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "kafka=0.0.0.0:9092") {
		t.Errorf("want a warning naming kafka=0.0.0.0:9092, got:\n%s", got)
	}
}

// TestTLSListenerHasItsTwinsGuards: a TLS listener has its plaintext
// twin's connection cap (its own count of that size) and idle timeout, and
// its idle closes are counted as the twin's are.
func TestTLSListenerHasItsTwinsGuards(t *testing.T) {
	c := newCerts(t)
	cfg := testConfig(t)
	cfg.HTTPTLSAddr, cfg.HTTPMaxConnections, cfg.HTTPIdleTimeout = "127.0.0.1:0", 1, 200*time.Millisecond
	c.apply(&cfg, false)
	s, _ := newTestServer(t, cfg)
	start(t, s)
	cc, err := c.ca.ClientConfig(tlstest.Pair{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := net.Dial("tcp", s.Addr(HTTP)) // the twin's slot: not the TLS listener's
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	first := dialTLSHTTP(t, s.Addr(HTTPTLS), cc)
	second, err := tls.Dial("tcp", s.Addr(HTTPTLS), cc)
	if err == nil {
		_ = second.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = second.Read(make([]byte, 1))
		second.Close()
	}
	if err == nil {
		t.Error("a second TLS connection was served over a cap of 1")
	}
	waitFor(t, "the refusal counted", func() bool {
		return metricValue(t, s.Metrics(), "sluice_connections_refused_total", "http-tls") == 1
	})

	begin := time.Now()
	if _, err := first.ReadByte(); err == nil {
		t.Fatal("read on an idle keep-alive connection returned data")
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("closed after %s idle, want about 200ms", took)
	}
	waitFor(t, "the idle close counted", func() bool {
		return metricValue(t, s.Metrics(), "sluice_connections_idle_closed_total", "http-tls") == 1
	})
}

// dialTLSHTTP opens a TLS connection to addr and completes one keep-alive
// /healthz request on it, leaving it idle; reads go through the returned
// reader, which holds whatever the response left buffered.
func dialTLSHTTP(t *testing.T, addr string, cc *tls.Config) *bufio.Reader {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz over tls: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	return br
}
