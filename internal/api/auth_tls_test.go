package api_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/broker"
)

// testCA signs the certificates of one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert, key, pool}
}

// issue signs a leaf: a server's for 127.0.0.1, or a client's named cn.
func (ca *testCA) issue(t *testing.T, cn string, server bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A verified client certificate is its Common Name's principal; a client
// without one (and without a token) is unauthenticated; a certificate of
// another CA does not get through the handshake.
func TestClientCertificateIsItsCommonNamesPrincipal(t *testing.T) {
	f, h := newAuthAPI(t)
	ca := newCA(t, "test CA")
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server", true)},
		ClientCAs: ca.pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	srv.EnableHTTP2 = true                           // gRPC
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the stranger's handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if _, err := f.b.CreateQueue(broker.QueueSettings{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	withCert := func(cert *tls.Certificate, opts ...client.Option) *client.Client {
		tc := &tls.Config{RootCAs: ca.pool}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		return client.New(srv.URL, append(opts, client.WithTLS(tc))...)
	}
	carol := ca.issue(t, "carol", false)
	for _, proto := range []client.Protocol{client.ProtocolConnect, client.ProtocolGRPC} {
		c := withCert(&carol, client.WithProtocol(proto))
		if _, err := c.Receive(ctx, "orders", client.Wait(0)); err != nil {
			t.Errorf("carol (protocol %d) may receive orders: %v", proto, err)
		}
		if _, err := c.Send(ctx, "orders", []byte("x")); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("carol (protocol %d) may not send: %v", proto, err)
		}
	}
	if _, err := withCert(nil).Receive(ctx, "orders", client.Wait(0)); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("TLS without a certificate or token: %v, want unauthenticated", err)
	}
	// A token over TLS works without a certificate; a wrong token beside a
	// good certificate is refused (a credential sent is a credential meant).
	if _, err := withCert(nil, client.WithToken(aliceToken)).Send(ctx, "orders", []byte("x")); err != nil {
		t.Errorf("alice's token over TLS: %v", err)
	}
	if _, err := withCert(&carol, client.WithToken("sl_wrong")).Receive(ctx, "orders", client.Wait(0)); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a wrong token beside a good certificate: %v, want unauthenticated", err)
	}
	stranger := newCA(t, "another CA").issue(t, "alice", false)
	if _, err := withCert(&stranger).Receive(ctx, "orders", client.Wait(0)); err == nil || connect.CodeOf(err) == connect.CodePermissionDenied {
		t.Errorf("a certificate of another CA: %v, want a failed handshake", err)
	}
}

// curl, as an operator would call the API: 401 without a token, the
// Connect JSON error naming the reason, 200 with one.
func TestCurlWithAndWithoutAToken(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not installed; CI must install it (.ci/run)")
		}
		t.Skip("curl is not installed")
	}
	f := startAuth(t)
	if _, err := f.b.CreateQueue(broker.QueueSettings{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		args = append([]string{"-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
			"-d", `{"queue":"orders","messages":[{"body":"aGk="}]}`, f.url + "/sluice.v1.QueueService/SendBatch"}, args...)
		out, err := exec.CommandContext(t.Context(), curl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run()
	if !strings.HasSuffix(out, "\n401") || !strings.Contains(out, `"code":"unauthenticated"`) || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Errorf("curl without a token: %s", out)
	}
	if out := run("-H", "Authorization: Bearer "+bobToken); !strings.HasSuffix(out, "\n403") || !strings.Contains(out, `"code":"permission_denied"`) {
		t.Errorf("curl as bob: %s", out)
	}
	if out := run("-H", "Authorization: Bearer "+aliceToken); !strings.HasSuffix(out, "\n200") || !strings.Contains(out, "messageId") {
		t.Errorf("curl as alice: %s", out)
	}
	st, _ := f.b.QueueStats("orders")
	if st.Sent != 1 {
		t.Errorf("sent %d, want 1 (only alice's)", st.Sent)
	}
}
