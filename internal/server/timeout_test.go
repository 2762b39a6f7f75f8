package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Slowloris: a client that sends its headers or its body a byte at a time
// holds a connection (and a goroutine and a descriptor) for as long as the
// server lets it. Twenty of them are cut off within the read timeouts: the
// header timeout before any handler runs, the body timeout whether the
// handler reads the body (as Connect does) or not (health).
func TestSlowClientsAreCutOff(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cfg := testConfig(t)
	cfg.ReadHeaderTimeout, cfg.ReadBodyTimeout = timeout, timeout
	s, _ := newTestServer(t, cfg)
	s.RegisterHTTP("POST /rpc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	start(t, s)
	for _, tc := range []struct {
		name, head string
		trickle    bool // the head is sent at once, the rest a byte at a time
		wantStatus int  // the answer before the close
	}{
		// net/http answers headers cut off with a 400.
		{"headers", "POST /rpc HTTP/1.1\r\nHost: localhost\r\n", false, http.StatusBadRequest},
		{"body read by the handler", "POST /rpc HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n", true, http.StatusRequestTimeout},
		// Answered at once (the mux's 405); the unread body is then
		// drained, within the same deadline, before the close.
		{"body nobody reads", "POST /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n", true, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					took, status := slowloris(t, s.Addr(HTTP), tc.head, tc.trickle)
					if took > timeout+2*time.Second {
						t.Errorf("client %d: closed after %s, want about %s", i, took, timeout)
					}
					if status != tc.wantStatus {
						t.Errorf("client %d: status %d, want %d", i, status, tc.wantStatus)
					}
				})
			}
			wg.Wait()
		})
	}
}

// slowloris sends head, then one byte every 50 ms (of headers, or of a
// body if trickleBody), until the server closes the connection or 10 s
// pass. It returns how long that took and the status of any answer.
func slowloris(t *testing.T, addr, head string, trickleBody bool) (time.Duration, int) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0, 0
	}
	defer nc.Close()
	begin := time.Now()
	if _, err := io.WriteString(nc, head); err != nil {
		t.Error(err)
		return 0, 0
	}
	answered := make(chan int, 1)
	go func() { // ends when nc is closed, by the server or the defer
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			answered <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		answered <- resp.StatusCode
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	b := []byte("X-Slow: y\r\n")
	for i := 0; ; i++ {
		select {
		case status := <-answered:
			// The answer may come before the close; wait for the close.
			_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			io.Copy(io.Discard, nc)
			return time.Since(begin), status
		case <-tick.C:
			c := b[i%len(b)]
			if trickleBody {
				c = 'a'
			}
			// A failed write means the server closed: the reader reports.
			_, _ = nc.Write([]byte{c})
		}
	}
}

// A long poll reads its small request at once and then waits far longer
// than the body timeout for something to answer: it must not be cut off,
// over HTTP/1.1 (whose background read watches the idle connection) or
// HTTP/2.
func TestLongPollOutlivesBodyTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	cfg := testConfig(t)
	cfg.ReadBodyTimeout = timeout
	s, _ := newTestServer(t, cfg)
	s.RegisterHTTP("POST /poll", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(3 * timeout):
			io.WriteString(w, "waited")
		case <-r.Context().Done():
			// The client sees no answer: the test fails below.
		}
	}))
	start(t, s)
	h2 := new(http.Protocols)
	h2.SetUnencryptedHTTP2(true)
	for name, tr := range map[string]*http.Transport{"HTTP/1.1": {}, "HTTP/2": {Protocols: h2}} {
		t.Run(name, func(t *testing.T) {
			defer tr.CloseIdleConnections()
			for _, body := range []string{`{"wait":20}`, ""} {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+s.Addr(HTTP)+"/poll", strings.NewReader(body))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					cancel()
					t.Fatalf("body %q: %v", body, err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				cancel()
				if resp.StatusCode != http.StatusOK || string(got) != "waited" {
					t.Errorf("body %q: %d %q, want 200 \"waited\"", body, resp.StatusCode, got)
				}
			}
		})
	}
}

// A keep-alive connection idle for the idle timeout is closed and counted.
func TestIdleHTTPConnectionIsClosedAndCounted(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPIdleTimeout = 200 * time.Millisecond
	s, _ := newTestServer(t, cfg)
	start(t, s)
	c := dialHTTP(t, s.Addr(HTTP))
	if status := c.get(t, "/healthz"); status != http.StatusOK {
		t.Fatalf("healthz: %d", status)
	}
	begin := time.Now()
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF", err)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("closed after %s idle, want about 200ms", took)
	}
	waitFor(t, "the idle close to be counted", func() bool {
		return metricValue(t, s.Metrics(), "sluice_connections_idle_closed_total", "http") == 1
	})
}
