package kafka

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and client
// certificates by Common Name, made in the test.
type testPKI struct {
	t      testing.TB
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
	caPEM  []byte
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &testPKI{t: t, caCert: ca, caKey: key, pool: pool,
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate: a server one for 127.0.0.1 when server,
// else a client one with Common Name cn.
func (p *testPKI) issue(cn string, server bool) tls.Certificate {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startTLSAuthNode serves Kafka with authentication on a TLS listener
// (client certificates verified if given, against the test CA) and
// advertises it.
func startTLSAuthNode(t *testing.T, p *testPKI, topics ...string) *authNode {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{p.issue("127.0.0.1", true)},
		ClientAuth:   tls.VerifyClientCertIfGiven, ClientCAs: p.pool, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	portN, _ := strconv.Atoi(port)
	n := startAuthNode(t, testUsers+"  - {user: mallory, allow: [describe], resources: [\"cluster\"]}\n",
		Config{AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(portN)}, topics...)
	go func() { _ = n.s.Serve(ln) }()
	n.addr = ln.Addr().String()
	return n
}

func (p *testPKI) clientTLS(cert *tls.Certificate) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// TestMutualTLS: a verified client certificate authenticates its Common
// Name without SASL; without one a TLS connection is anonymous until it
// authenticates with SASL (SASL_SSL).
func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	n := startTLSAuthNode(t, p, "orders")
	ctx := testCtx(t, 30*time.Second)
	alice := p.issue("alice", false)
	cl := n.client(kgo.DialTLSConfig(p.clientTLS(&alice)))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("mtls")}).FirstErr(); err != nil {
		t.Fatalf("alice by certificate: %v", err)
	}
	mallory := p.issue("mallory", false)
	cl = n.client(kgo.DialTLSConfig(p.clientTLS(&mallory)), kgo.DisableIdempotentWrite())
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("mallory by certificate: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// No certificate and no SASL: refused; SASL over TLS: alice.
	cl = n.client(kgo.DialTLSConfig(p.clientTLS(nil)), kgo.RetryTimeout(time.Second))
	if err := cl.ProduceSync(testCtx(t, 2*time.Second), &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("anonymous TLS produce succeeded")
	}
	cl = n.as(scram256("alice", "alice-secret"), kgo.DialTLSConfig(p.clientTLS(nil)))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("sasl_ssl")}).FirstErr(); err != nil {
		t.Fatalf("SCRAM over TLS: %v", err)
	}
}

// TestKcatSASLSSL: kcat with SASL_SSL and SCRAM-SHA-256 against a TLS
// listener whose CA it is given.
func TestKcatSASLSSL(t *testing.T) {
	path := needClient(t, "kcat", "kcat")
	p := newPKI(t)
	n := startTLSAuthNode(t, p, "orders")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		base := []string{"-b", n.addr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + ca,
			"-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
		cmd := execCommand(t, path, append(base, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("k:ssl\n", "-P", "-t", "orders", "-K:")
	if out := run("", "-C", "-t", "orders", "-o", "beginning", "-e", "-K:", "-f", "%k:%s\n", "-q"); strings.TrimSpace(out) != "k:ssl" {
		t.Fatalf("consumed %q", out)
	}
}
