package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// DNS rebinding: a loopback listener without authentication answers only requests
// addressed to loopback, localhost or its advertised host, on every HTTP listener (the
// native API with the console, the SQS front-end, the metrics listener), and the
// refused request reaches no handler. The first case is the tester's: a console purge
// sent by a page whose name was rebound to 127.0.0.1.
func TestHostGuardOnLoopbackWithoutAuth(t *testing.T) {
	cfg := testConfig(t)
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.HTTPAdvertisedAddr = "api.dev.test:8080"
	cfg.SQSAdvertisedAddr = "Queues.Dev.Test.:9324" // the case and the final dot do not matter
	s, logs := newTestServer(t, cfg)
	var served atomic.Int64
	stub := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		io.WriteString(w, "served")
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx, func(_ context.Context, s *Server) error {
		s.RegisterHTTP("POST /ui/queues/{name}/purge", stub)            // the console's form
		s.RegisterHTTP("POST /sluice.v1.QueueService/ListQueues", stub) // the native API
		s.RegisterFrontend(SQS, s.HTTPFrontend(SQS, stub))
		return nil
	}); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Wait(ctx); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	targets := []struct{ listener, method, path string }{
		{HTTP, "POST", "/ui/queues/victim/purge"},
		{HTTP, "POST", "/sluice.v1.QueueService/ListQueues"},
		{SQS, "POST", "/"},
		{Metrics, "GET", "/metrics"},
		{Metrics, "GET", "/healthz"},
	}
	cases := []struct {
		name, host string // host: "PORT" is replaced by the listener's port
		allowedOn  []string
	}{
		{"the tester's rebound name", "evil.example:PORT", nil},
		{"a rebound name without a port", "evil.example", nil},
		{"a name that starts like localhost", "localhost.evil.example:PORT", nil},
		{"a name that embeds 127.0.0.1", "127.0.0.1.nip.io:PORT", nil},
		{"a LAN address", "192.168.1.20:PORT", nil},
		{"0.0.0.0, which some browsers send to loopback", "0.0.0.0:PORT", nil},
		{"localhost", "localhost:PORT", []string{HTTP, SQS, Metrics}},
		{"127.0.0.1", "127.0.0.1:PORT", []string{HTTP, SQS, Metrics}},
		{"[::1]", "[::1]:PORT", []string{HTTP, SQS, Metrics}},
		{"another loopback address", "127.0.0.2:PORT", []string{HTTP, SQS, Metrics}},
		{"LOCALHOST with a final dot", "LOCALHOST.:PORT", []string{HTTP, SQS, Metrics}},
		{"a name under .localhost", "console.localhost:PORT", []string{HTTP, SQS, Metrics}},
		{"the HTTP listener's advertised host", "api.dev.test:8080", []string{HTTP}},
		{"the SQS listener's advertised host", "queues.dev.test:9324", []string{SQS}},
	}
	for _, c := range cases {
		for _, tg := range targets {
			t.Run(c.name+"/"+tg.listener+tg.path, func(t *testing.T) {
				addr := s.Addr(tg.listener)
				_, port, _ := net.SplitHostPort(addr)
				req, err := http.NewRequest(tg.method, "http://"+addr+tg.path, strings.NewReader("confirm=victim"))
				if err != nil {
					t.Fatal(err)
				}
				host := strings.Replace(c.host, "PORT", port, 1)
				req.Host = host
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Origin", "http://"+host) // a rebound page is same-origin to the browser
				req.Header.Set("Sec-Fetch-Site", "same-origin")
				before := served.Load()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ran := served.Load() != before || tg.listener == Metrics && resp.StatusCode == http.StatusOK
				if slices.Contains(c.allowedOn, tg.listener) {
					if resp.StatusCode != http.StatusOK || !ran {
						t.Fatalf("Host %s: %d %q, want it served", host, resp.StatusCode, body)
					}
					return
				}
				if resp.StatusCode != http.StatusMisdirectedRequest || ran {
					t.Fatalf("Host %s: %d %q (handler ran: %v), want 421 and nothing run", host, resp.StatusCode, body, ran)
				}
				fix := "--" + tg.listener + "-advertised-addr"
				if tg.listener == Metrics {
					fix = "connect by 127.0.0.1, [::1] or localhost"
				}
				if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || strings.Count(string(body), "\n") != 1 ||
					!strings.Contains(string(body), "misdirected request") || !strings.Contains(string(body), fix) {
					t.Fatalf("refusal: %s %q, want one line of text naming %s", resp.Header.Get("Content-Type"), body, fix)
				}
			})
		}
	}
	if !strings.Contains(logs.String(), "refused a request addressed to a name this listener does not answer to") {
		t.Errorf("no refusal in the log:\n%s", logs)
	}
}

// A refused request's body is never read: the answer goes out at once and the
// connection closes, whether the body is slow to come (net/http would otherwise drain
// it after the handler, with no deadline, before answering) or carries what would be
// parsed as a next request.
func TestHostGuardRefusalReadsNoBody(t *testing.T) {
	s, _ := newTestServer(t, testConfig(t))
	start(t, s)
	for _, head := range []string{
		"POST /sluice.v1.QueueService/CreateQueue HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
		"POST /sluice.v1.QueueService/CreateQueue HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{",
	} {
		nc, err := net.DialTimeout("tcp", s.Addr(HTTP), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(3 * time.Second)) // the body never comes: a drain would hit this
		if _, err := io.WriteString(nc, head); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(nc)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			nc.Close()
			t.Fatalf("no answer while the body is pending: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest || !resp.Close || !strings.Contains(string(body), "misdirected") {
			t.Errorf("%d %q, close %v; want 421 and the connection closed", resp.StatusCode, body, resp.Close)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("after the answer: %v, want the connection closed (EOF)", err)
		}
		nc.Close()
	}
}

// Where the check does not apply, any Host is served as before: with --auth-file
// (a page has no credentials), and on a listener beyond loopback (it is reached by
// whatever names its network gives it, sluice:9324 between containers).
func TestHostGuardOnlyOnLoopbackWithoutAuth(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, c := range []struct {
		name    string
		set     func(*Config)
		guarded bool
	}{
		{"loopback, no auth file", func(*Config) {}, true},
		{"localhost, no auth file", func(c *Config) { c.HTTPAddr, c.SQSAddr = "localhost:8080", "localhost:9324" }, true},
		{"loopback, auth file", func(c *Config) { c.AuthFile = "users.yaml" }, false},
		{"every interface, anonymous allowed", func(c *Config) {
			c.HTTPAddr, c.SQSAddr, c.InsecureAllowAnonymous = "0.0.0.0:8080", "0.0.0.0:9324", true
		}, false},
		{"every interface, auth file", func(c *Config) { c.HTTPAddr, c.SQSAddr, c.AuthFile = ":8080", ":9324", "users.yaml" }, false},
	} {
		cfg := testConfig(t)
		c.set(&cfg)
		s, _ := newTestServer(t, cfg) // New binds nothing
		for _, name := range []string{HTTP, SQS} {
			for _, host := range []string{"sluice:9324", "evil.example:8080", "127.0.0.1:8080"} {
				r := httptest.NewRequest("GET", "/", nil)
				r.Host = host
				rec := httptest.NewRecorder()
				s.guardHost(name, ok).ServeHTTP(rec, r)
				want := http.StatusNoContent
				if c.guarded && host != "127.0.0.1:8080" {
					want = http.StatusMisdirectedRequest
				}
				if rec.Code != want {
					t.Errorf("%s: %s, Host %s: %d, want %d", c.name, name, host, rec.Code, want)
				}
			}
		}
	}
}

// hostAllowed on the forms a Host header takes.
func TestHostAllowed(t *testing.T) {
	for _, c := range []struct {
		host, advertised string
		want             bool
	}{
		{"127.0.0.1:8080", "", true},
		{"127.255.0.1", "", true},
		{"[::1]:8080", "", true},
		{"[::1]", "", true},
		{"[::ffff:127.0.0.1]:8080", "", true},
		{"localhost", "", true},
		{"Localhost.:8080", "", true},
		{"a.b.localhost:8080", "", true},
		{"", "", true}, // HTTP/1.0 without a Host: no browser's
		{"evil.example:8080", "", false},
		{"localhost.evil.example", "", false},
		{"evillocalhost:8080", "", false},
		{"[::2]:8080", "", false},
		{"10.1.2.3:9324", "", false},
		{"0.0.0.0:8080", "", false},
		{"sluice.lan:9324", "sluice.lan", true},
		{"SLUICE.lan.:1", "sluice.lan", true},
		{"other.lan:9324", "sluice.lan", false},
		{"[fd00::1]:9324", "fd00::1", true},
		{"[fd00::2]:9324", "fd00::1", false},
	} {
		if got := hostAllowed(c.host, c.advertised); got != c.want {
			t.Errorf("hostAllowed(%q, %q) = %v, want %v", c.host, c.advertised, got, c.want)
		}
	}
	for in, want := range map[string]string{"sluice.lan:9324": "sluice.lan", "[fd00::1]:9324": "fd00::1", "": "", "Host.": "Host"} {
		if got := hostOnly(in); got != want {
			t.Errorf("hostOnly(%q) = %q, want %q", in, got, want)
		}
	}
}
