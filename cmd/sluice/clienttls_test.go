package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// writeCert signs a certificate for cn with parent (self-signed when nil)
// and writes its PEM and its key's beside each other in dir.
func writeCert(t *testing.T, dir, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA, server bool) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	switch {
	case isCA:
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	case server:
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
	default:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kder, _ := x509.MarshalECPrivateKey(key)
	certPath, keyPath := filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key, certPath, keyPath
}

// The client commands reach an https:// server with a private CA, and a
// client certificate is their principal.
func TestCLIOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caPath, _ := writeCert(t, dir, "ca", nil, nil, true, false)
	_, _, srvCert, srvKey := writeCert(t, dir, "server", ca, caKey, false, true)
	_, _, carolCert, carolKey := writeCert(t, dir, "carol", ca, caKey, false, false)

	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	store, err := auth.NewStatic(&auth.File{ACLs: []auth.Rule{{User: "carol", Allow: []auth.Operation{auth.All}, Resources: []auth.Pattern{"queue:*"}}}}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, r := range api.New(api.Options{Broker: b, Logger: slog.New(slog.DiscardHandler), Auth: store}).Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	pair, err := tls.LoadX509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	mustCLI(t, srv.URL, "", "queue", "create", "jobs", "--tls-ca", caPath, "--tls-client-cert", carolCert, "--tls-client-key", carolKey)
	t.Setenv("SLUICE_TLS_CA", caPath) // the environment works as the flags do
	if _, _, err := cli(t, srv.URL, "", "queue", "create", "jobs2"); err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
		t.Errorf("TLS without a client certificate: %v, want UNAUTHENTICATED", err)
	}
	// A client certificate of another CA: Go's client does not send it, the broker sees
	// none, and the hint says the one given was not taken (not "pass a certificate").
	other, otherKey, _, _ := writeCert(t, dir, "other-ca", nil, nil, true, false)
	_, _, malloryCert, malloryKey := writeCert(t, dir, "mallory", other, otherKey, false, false)
	_, _, err = cli(t, srv.URL, "", "queue", "create", "jobs3", "--tls-client-cert", malloryCert, "--tls-client-key", malloryKey)
	if err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") || !strings.Contains(err.Error(), "client certificate given was not accepted") {
		t.Errorf("a client certificate of another CA: %v, want UNAUTHENTICATED saying the certificate given was not accepted", err)
	}
	t.Setenv("SLUICE_TLS_CA", "")
	if _, _, err := cli(t, srv.URL, "", "queue", "list"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a private CA's server without --tls-ca: %v, want a certificate error", err)
	}
	if _, _, err := cli(t, srv.URL, "", "queue", "list", "--tls-client-cert", carolCert); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("--tls-client-cert without its key: %v", err)
	}
	if got := b.ListQueues(""); len(got) != 1 || got[0] != "jobs" {
		t.Errorf("queues %v, want [jobs]", got)
	}
}
