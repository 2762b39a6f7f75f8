package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// TestCertificateRotationUnderLoad: while clients keep opening connections
// and others keep using theirs, the files are swapped twice (by rename, key
// then certificate, as tlstest.Install does). No request fails; every
// connection opened after the server switched gets the new certificate;
// connections opened before keep working on the old one.
func TestCertificateRotationUnderLoad(t *testing.T) {
	c := newCerts(t)
	cfg := testConfig(t)
	cfg.HTTPTLSAddr, cfg.TLSReloadInterval = "127.0.0.1:0", 10*time.Millisecond
	c.apply(&cfg, false)
	s, _ := newTestServer(t, cfg)
	start(t, s)
	url := "https://" + s.Addr(HTTPTLS) + "/healthz"
	clientCfg, err := c.ca.ClientConfig(tlstest.Pair{})
	if err != nil {
		t.Fatal(err)
	}

	var (
		serving  atomic.Int64 // the serial the server is known to serve (set once Leaf shows it)
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		newConns atomic.Int64
		oldReqs  atomic.Int64
	)
	serving.Store(1)
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(format, a...))
		}
	}
	get := func(hc *http.Client) (int64, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
	}
	// halt stops the load and waits for it, once: at the end, or when a
	// t.Fatal below returns early.
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()
	// New clients: a fresh connection per request.
	for range 3 {
		wg.Go(func() {
			tr := &http.Transport{TLSClientConfig: clientCfg.Clone(), DisableKeepAlives: true}
			hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				atLeast := serving.Load()
				got, err := get(hc)
				newConns.Add(1)
				switch {
				case err != nil:
					fail("new connection: %v", err)
				case got < atLeast:
					fail("new connection opened while serial %d served got serial %d", atLeast, got)
				}
			}
		})
	}
	// Old clients: one kept-alive connection each, opened before any swap.
	for range 2 {
		tr := &http.Transport{TLSClientConfig: clientCfg.Clone(), MaxConnsPerHost: 1}
		hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		if got, err := get(hc); err != nil || got != 1 {
			t.Fatalf("old client's first request: serial %d, %v", got, err)
		}
		wg.Go(func() {
			defer tr.CloseIdleConnections()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := get(hc)
				oldReqs.Add(1)
				if err != nil || got != 1 {
					fail("old connection: serial %d, %v (want its first certificate, 1)", got, err)
				}
			}
		})
	}

	// progress waits (10 s at most) until n more new connections and n
	// more requests on old ones went through: load, not a fixed sleep.
	progress := func(n int64) {
		t.Helper()
		c0, r0 := newConns.Load(), oldReqs.Load()
		deadline := time.Now().Add(10 * time.Second)
		for newConns.Load() < c0+n || oldReqs.Load() < r0+n {
			if time.Now().After(deadline) {
				t.Fatalf("no load: %d new connections, %d old requests", newConns.Load()-c0, oldReqs.Load()-r0)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, next := range []struct {
		pair   tlstest.Pair
		serial int64
	}{{c.two, 2}, {c.three, 3}} {
		progress(10) // load on the current certificate
		if err := tlstest.Install(next.pair, c.liveCert, c.liveKey); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for s.TLS().Leaf().SerialNumber.Int64() != next.serial {
			if time.Now().After(deadline) {
				t.Fatalf("serial %d never served", next.serial)
			}
			time.Sleep(time.Millisecond)
		}
		serving.Store(next.serial)
	}
	progress(10)
	halt()

	for _, f := range failures {
		t.Error(f)
	}
	if n := scrape(s.Metrics(), `sluice_tls_reloads_total{result="ok"}`); n != 2 {
		t.Errorf("reloads ok %v, want 2", n)
	}
	if n := scrape(s.Metrics(), `sluice_tls_reloads_total{result="error"}`); n != 0 {
		t.Errorf("reload errors %v, want 0 (a pair caught between its renames is not one)", n)
	}
	t.Logf("%d new connections, %d requests on 2 old ones", newConns.Load(), oldReqs.Load())
}

// TestBadCertificateOnReloadKeepsServing: a broken certificate file is
// counted as a failed reload and the old certificate keeps serving new
// connections.
func TestBadCertificateOnReloadKeepsServing(t *testing.T) {
	c := newCerts(t)
	cfg := testConfig(t)
	cfg.HTTPTLSAddr, cfg.TLSReloadInterval = "127.0.0.1:0", 10*time.Millisecond
	c.apply(&cfg, false)
	s, logs := newTestServer(t, cfg)
	start(t, s)
	if err := os.WriteFile(c.liveCert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed reload counted", func() bool {
		return scrape(s.Metrics(), `sluice_tls_reloads_total{result="error"}`) == 1
	})
	cc, _ := c.ca.ClientConfig(tlstest.Pair{})
	conn, err := tls.Dial("tcp", s.Addr(HTTPTLS), cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got != 1 {
		t.Errorf("serial %d after a bad reload, want the old 1", got)
	}
	if exp := scrape(s.Metrics(), "sluice_tls_certificate_expiry_timestamp_seconds"); exp < float64(time.Now().Unix()) {
		t.Errorf("certificate expiry %v is not in the future", exp)
	}
	if !strings.Contains(logs.String(), "tls certificate reload failed") {
		t.Errorf("no error logged:\n%s", logs.String())
	}
}
