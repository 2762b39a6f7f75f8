package tlsconf

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// fixture is a CA, two server certificates it signed (serials 1 and 2)
// and the live file paths the reloader reads, holding serial 1.
type fixture struct {
	ca         *tlstest.CA
	one, two   tlstest.Pair
	cert, key  string
	mu         sync.Mutex
	reloads    int
	failures   []error
	reloadedTo []string // serials reported
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed ("+err.Error()+"): apt-get install openssl")
	}
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ca: ca, cert: filepath.Join(dir, "live.crt"), key: filepath.Join(dir, "live.key")}
	if f.one, err = ca.Issue("one", "broker", 1); err != nil {
		t.Fatal(err)
	}
	if f.two, err = ca.Issue("two", "broker", 2); err != nil {
		t.Fatal(err)
	}
	if err := tlstest.Install(f.one, f.cert, f.key); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) options(clientCA string) Options {
	var now time.Time
	return Options{CertFile: f.cert, KeyFile: f.key, ClientCAFile: clientCA,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Each reading of the clock is 600 ms after the last: a broken file seen by
		// one poll has settled (failSettle) by the second poll after it.
		Now: func() time.Time { now = now.Add(600 * time.Millisecond); return now },
		OnReload: func(leaf *x509.Certificate, err error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if err != nil {
				f.failures = append(f.failures, err)
				return
			}
			f.reloads++
			f.reloadedTo = append(f.reloadedTo, leaf.SerialNumber.String())
		}}
}

func (f *fixture) failureCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.failures)
}

// serve accepts TLS connections with cfg, answering each line with the
// principal it saw ("-" for none), until the test ends.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				buf := make([]byte, 1)
				for {
					if _, err := nc.Read(buf); err != nil {
						return
					}
					p, ok := ConnPrincipal(nc)
					if !ok {
						p = "-"
					}
					if _, err := io.WriteString(nc, p+"\n"); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// ask sends one byte on c and reads the principal the server saw.
func ask(t *testing.T, c *tls.Conn) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{'?'}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	buf := make([]byte, 1)
	for {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		if buf[0] == '\n' {
			return b.String()
		}
		b.WriteByte(buf[0])
	}
}

func dial(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func serial(c *tls.Conn) string {
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestPollServesNewCertificateToNewConnections: after the files change, a
// poll makes new handshakes get the new certificate while a connection
// made before keeps working on the old one.
func TestPollServesNewCertificateToNewConnections(t *testing.T) {
	f := newFixture(t)
	r, err := New(f.options(""))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.ServerConfig())
	client, err := f.ca.ClientConfig(tlstest.Pair{})
	if err != nil {
		t.Fatal(err)
	}
	old := dial(t, addr, client)
	if got := serial(old); got != "1" {
		t.Fatalf("first serial %s, want 1", got)
	}
	ask(t, old)

	r.Poll() // nothing changed: nothing reported
	if err := tlstest.Install(f.two, f.cert, f.key); err != nil {
		t.Fatal(err)
	}
	r.Poll()
	if got := serial(dial(t, addr, client)); got != "2" {
		t.Errorf("after the swap a new connection got serial %s, want 2", got)
	}
	if got := r.Leaf().SerialNumber.String(); got != "2" {
		t.Errorf("Leaf serial %s, want 2", got)
	}
	ask(t, old) // the old connection still works
	if f.reloads != 1 || f.failureCount() != 0 {
		t.Errorf("reported %d reloads (%v) and %d failures, want 1 and 0", f.reloads, f.reloadedTo, f.failureCount())
	}
}

// TestBadFileKeepsOldCertificate: a certificate file that does not load
// is reported once (by a poll a second or more after the first that saw it:
// that one may be a swap caught half-way), the old certificate keeps serving, and fixing
// the file reloads.
func TestBadFileKeepsOldCertificate(t *testing.T) {
	f := newFixture(t)
	r, err := New(f.options(""))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.ServerConfig())
	client, _ := f.ca.ClientConfig(tlstest.Pair{})
	if err := os.WriteFile(f.cert, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.Poll()
	if n := f.failureCount(); n != 0 {
		t.Fatalf("%d failures after the first poll, want 0 (it may be a swap half done)", n)
	}
	r.Poll()
	r.Poll()
	if n := f.failureCount(); n != 1 {
		t.Fatalf("%d failures after three polls of one broken file, want 1", n)
	}
	if got := serial(dial(t, addr, client)); got != "1" {
		t.Errorf("with a broken file a new connection got serial %s, want the old 1", got)
	}
	if err := tlstest.Install(f.two, f.cert, f.key); err != nil {
		t.Fatal(err)
	}
	r.Poll()
	if got := serial(dial(t, addr, client)); got != "2" {
		t.Errorf("after the fix a new connection got serial %s, want 2", got)
	}
}

// TestHalfSwappedPairIsNotAFailure: the new key beside the old certificate
// (a swap between its two renames) is neither served nor counted.
func TestHalfSwappedPairIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	r, err := New(f.options(""))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(f.two.Key)
	if err := os.WriteFile(f.key, key, 0o600); err != nil {
		t.Fatal(err)
	}
	r.Poll()
	if err := tlstest.Install(f.two, f.cert, f.key); err != nil {
		t.Fatal(err)
	}
	r.Poll()
	if n := f.failureCount(); n != 0 || r.Leaf().SerialNumber.Int64() != 2 {
		t.Errorf("%d failures, serving serial %s; want 0 and 2", n, r.Leaf().SerialNumber)
	}
}

// TestReloadReportsAtOnce: an explicit reload (SIGHUP) of a broken file
// fails, is reported at once, and keeps the old certificate.
func TestReloadReportsAtOnce(t *testing.T) {
	f := newFixture(t)
	r, err := New(f.options(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.key); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Errorf("Reload: %v, want an error naming --tls-key", err)
	}
	if n := f.failureCount(); n != 1 || r.Leaf().SerialNumber.Int64() != 1 {
		t.Errorf("%d failures, serving serial %s; want 1 and 1", n, r.Leaf().SerialNumber)
	}
	r.Poll()
	r.Poll() // the same missing key: already reported
	if n := f.failureCount(); n != 1 {
		t.Errorf("%d failures after polls of the state SIGHUP reported, want 1", n)
	}
}

// TestNewRefusesBadFiles: a server does not start on files that do not
// load, and the error names the flag.
func TestNewRefusesBadFiles(t *testing.T) {
	f := newFixture(t)
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"missing cert", Options{CertFile: bad + ".none", KeyFile: f.key}, "--tls-cert"},
		{"key of another cert", Options{CertFile: f.cert, KeyFile: f.two.Key}, "--tls-cert/--tls-key"},
		{"ca not pem", Options{CertFile: f.cert, KeyFile: f.key, ClientCAFile: bad}, "--tls-client-ca"},
		{"no key", Options{CertFile: f.cert}, "key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestMutualTLSPrincipal: with a client CA, a client certificate that
// chains to it names the principal (its CN); a client without one still
// connects, with no principal; a certificate from another CA is refused
// in the handshake. Without a client CA no certificate is asked for, so
// none names a principal.
func TestMutualTLSPrincipal(t *testing.T) {
	f := newFixture(t)
	billing, err := f.ca.Issue("billing", "billing", 10)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlstest.NewCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := other.Issue("mallory", "billing", 11)
	if err != nil {
		t.Fatal(err)
	}
	mtls, err := New(f.options(f.ca.Cert))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(f.options(""))
	if err != nil {
		t.Fatal(err)
	}
	mtlsAddr, plainAddr := serve(t, mtls.ServerConfig()), serve(t, plain.ServerConfig())

	withCert, _ := f.ca.ClientConfig(billing)
	noCert, _ := f.ca.ClientConfig(tlstest.Pair{})
	foreign, _ := f.ca.ClientConfig(mallory)
	// Go's client sends no certificate the server's CA list does not name;
	// a hostile one would, so force it.
	forced := foreign.Certificates[0]
	foreign.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forced, nil }
	for _, tc := range []struct {
		name string
		addr string
		cfg  *tls.Config
		want string
	}{
		{"verified cert", mtlsAddr, withCert, "billing"},
		{"no cert", mtlsAddr, noCert, "-"},
		{"no client CA configured", plainAddr, withCert, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ask(t, dial(t, tc.addr, tc.cfg)); got != tc.want {
				t.Errorf("principal %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("cert of another CA", func(t *testing.T) {
		c, err := tls.Dial("tcp", mtlsAddr, foreign)
		if err == nil {
			// TLS 1.3: the client learns of the refusal on its first read.
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write([]byte{'?'})
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Fatal("a certificate of another CA was accepted")
		}
	})
	if _, ok := Principal(nil); ok {
		t.Error("Principal(nil) has a principal")
	}
	if _, ok := Principal(&tls.ConnectionState{HandshakeComplete: true}); ok {
		t.Error("a connection without a verified chain has a principal")
	}
}

// TestWatchReloadsOnSIGHUPAndPoll: Watch reloads on SIGHUP and, with a
// short interval, on its own.
func TestWatchReloadsOnSIGHUPAndPoll(t *testing.T) {
	f := newFixture(t)
	r, err := New(f.options(""))
	if err != nil {
		t.Fatal(err)
	}
	// Our own handler first, so a SIGHUP sent before Watch has registered
	// does not kill the test process.
	keep := make(chan os.Signal, 16)
	signal.Notify(keep, syscall.SIGHUP)
	defer signal.Stop(keep)

	ctx, cancel := context.WithCancel(t.Context())
	wait := r.Watch(ctx, time.Hour)
	defer func() { cancel(); wait() }()
	if err := tlstest.Install(f.two, f.cert, f.key); err != nil {
		t.Fatal(err)
	}
	waitSerial(t, r, 2, func() { _ = syscall.Kill(os.Getpid(), syscall.SIGHUP) })
	cancel()
	wait()

	ctx2, cancel2 := context.WithCancel(t.Context())
	wait2 := r.Watch(ctx2, 20*time.Millisecond)
	defer func() { cancel2(); wait2() }()
	if err := tlstest.Install(f.one, f.cert, f.key); err != nil {
		t.Fatal(err)
	}
	waitSerial(t, r, 1, func() {})
}

func waitSerial(t *testing.T, r *Reloader, want int64, nudge func()) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.Leaf().SerialNumber.Int64() != want {
		if time.Now().After(deadline) {
			t.Fatalf("still serving serial %s, want %d", r.Leaf().SerialNumber, want)
		}
		nudge()
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLogsWhatClientsWouldRefuse: a certificate served outside its validity loads (a
// replacement may be on its way) with a warning, not a plain "loaded" line; and files put
// back to the served certificate after a failed reload say the failure is over.
func TestLogsWhatClientsWouldRefuse(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"expired", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), "level=WARN msg=\"tls certificate loaded, but it has expired"},
		{"not valid yet", time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), "level=WARN msg=\"tls certificate loaded, but it is not valid yet"},
		{"valid", time.Now(), "level=INFO msg=\"tls certificate loaded\""},
	} {
		var logs bytes.Buffer
		o := f.options("")
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		o.Now = func() time.Time { return tc.at }
		if _, err := New(o); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !strings.Contains(logs.String(), tc.want) {
			t.Errorf("%s: logged %q, want %q", tc.name, logs.String(), tc.want)
		}
	}

	var logs bytes.Buffer
	o := f.options("")
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.cert, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.Poll()
	r.Poll()
	r.Poll()                                                      // reported
	if err := tlstest.Install(f.one, f.cert, f.key); err != nil { // back to what is served
		t.Fatal(err)
	}
	r.Poll()
	if !strings.Contains(logs.String(), "tls certificate files load again") {
		t.Errorf("no line saying the failure is over:\n%s", logs.String())
	}
}
