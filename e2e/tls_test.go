package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// TestBinaryTLSReloadOnSIGHUP: `sluice serve` with the TLS flags serves the
// certificate on its TLS listeners, health and metrics on --metrics-addr,
// and after the files are replaced and SIGHUP sent, new connections get
// the new certificate; SIGTERM still exits 0.
func TestBinaryTLSReloadOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the sluice binary")
	}
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed ("+err.Error()+"): apt-get install openssl")
	}
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	one, err := ca.Issue("one", "sluice", 1)
	if err != nil {
		t.Fatal(err)
	}
	two, err := ca.Issue("two", "sluice", 2)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := tlstest.Install(one, cert, key); err != nil {
		t.Fatal(err)
	}
	p := testproc.Serve(t, binary, "--data-dir", filepath.Join(dir, "data"), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "", "--sqs-addr", "", "--http-tls-addr", "127.0.0.1:0", "--kafka-tls-addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca.Cert,
		"--tls-reload-interval", "1h") // only SIGHUP reloads here
	httpsAddr, kafkaAddr, metricsAddr := p.Addr("http-tls"), p.Addr("kafka-tls"), p.Addr("metrics")
	cc, err := ca.ClientConfig(tlstest.Pair{})
	if err != nil {
		t.Fatal(err)
	}
	serial := func(addr string) int64 {
		t.Helper()
		c, err := tls.Dial("tcp", addr, cc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if s1, s2 := serial(httpsAddr), serial(kafkaAddr); s1 != 1 || s2 != 1 {
		t.Fatalf("serials %d and %d, want 1", s1, s2)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "sluice_tls_certificate_expiry_timestamp_seconds") {
		t.Errorf("no certificate expiry on /metrics:\n%.500s", b)
	}

	if err := tlstest.Install(two, cert, key); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for serial(httpsAddr) != 2 || serial(kafkaAddr) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("still the old certificate 10s after SIGHUP:\n%s", p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(p.Logs(), "tls certificate reloaded") {
		t.Errorf("no reload logged:\n%s", p.Logs())
	}
	p.Stop()
}

// TestBinaryRefusesNonLoopbackWithoutAuth: without --auth-file, asking for
// a listener on every interface stops `sluice serve` before it binds
// anything, saying why and what to do.
func TestBinaryRefusesNonLoopbackWithoutAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the sluice binary")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "0.0.0.0:0", "--sqs-addr", "")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started with a Kafka listener on 0.0.0.0 and no --auth-file:\n%s", out)
	}
	for _, want := range []string{"--kafka-addr", "not a loopback address", "--auth-file", "--insecure-allow-anonymous"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "listening") {
		t.Errorf("something was bound before the refusal:\n%s", out)
	}
}
