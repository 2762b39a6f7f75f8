package tcptransport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf"
)

// pki is a CA and node certificates made by openssl in a temporary directory, as an
// operator would make them.
type pki struct {
	dir  string
	pool *x509.CertPool
}

func openssl(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openssl %v: %v\n%s", args, err, out)
	}
}

// newPKI makes a CA named name and a certificate per node (CN node-N, SAN 127.0.0.1,
// usable as server and client).
func newPKI(t *testing.T, name string, nodes int) *pki {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		testproc.Missing(t, "openssl is not installed: the TLS test makes its certificates with it")
	}
	dir := t.TempDir()
	ec := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"}
	openssl(t, dir, append([]string{"req", "-x509"}, append(ec, "-keyout", "ca.key", "-out", "ca.pem",
		"-days", "1", "-subj", "/CN="+name)...)...)
	ext := "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
	if err := os.WriteFile(filepath.Join(dir, "node.ext"), []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= nodes; i++ {
		n := fmt.Sprintf("n%d", i)
		openssl(t, dir, append([]string{"req"}, append(ec, "-keyout", n+".key", "-out", n+".csr",
			"-subj", "/CN=node-"+fmt.Sprint(i))...)...)
		openssl(t, dir, "x509", "-req", "-in", n+".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
			"-CAcreateserial", "-out", n+".pem", "-days", "1", "-extfile", "node.ext")
	}
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{dir: dir, pool: x509.NewCertPool()}
	if !p.pool.AppendCertsFromPEM(pem) {
		t.Fatal("ca.pem holds no certificate")
	}
	return p
}

func (p *pki) cert(t testing.TB, id multiraft.NodeID) tls.Certificate {
	c, err := tls.LoadX509KeyPair(filepath.Join(p.dir, fmt.Sprintf("n%d.pem", id)), filepath.Join(p.dir, fmt.Sprintf("n%d.key", id)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// server and client are the two halves of mutual TLS between nodes: each side presents
// its node certificate and verifies the other's against the cluster CA.
func (p *pki) server(t testing.TB, id multiraft.NodeID) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.cert(t, id)}, ClientCAs: p.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
}

func (p *pki) client(t testing.TB, id multiraft.NodeID) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.cert(t, id)}, RootCAs: p.pool, MinVersion: tls.VersionTLS13}
}

// nodeCN binds a certificate to a node id: the principal of its verified chain (the one
// function the API and Kafka use too) must be node-N.
func nodeCN(id multiraft.NodeID, cs tls.ConnectionState) error {
	cn, ok := tlsconf.Principal(&cs)
	if !ok {
		return errors.New("no verified certificate")
	}
	if want := fmt.Sprintf("node-%d", id); cn != want {
		return fmt.Errorf("certificate of %q, not %q", cn, want)
	}
	return nil
}

// TestMutualTLS: three hosts over mutual TLS with openssl-made certificates, each bound
// to its node id, commit in every group; a dialler without a certificate, with one of
// another CA, with another node's, or without TLS at all is refused at the listener and
// delivers nothing.
func TestMutualTLS(t *testing.T) {
	ca := newPKI(t, "sluice test CA", 3)
	c := newCluster(t, opts{nodes: 3, groups: 4, verifyPeer: nodeCN,
		serverTLS: func(id multiraft.NodeID) *tls.Config { return ca.server(t, id) },
		clientTLS: func(id multiraft.NodeID) *tls.Config { return ca.client(t, id) }})
	checkCommitsEverywhere(t, c, 2)
	// The request stream is authenticated the same way: node 2's request reaches node 1's
	// host, whose test state machine answers none (an error answer, not a refusal).
	var re *multiraft.RemoteError
	if _, err := c.nodes[2].tr.Request(context.Background(), 1, c.groupIDs()[0], []byte("x")); !errors.As(err, &re) ||
		!strings.Contains(re.Msg, "requests not served") {
		t.Fatalf("request over mutual TLS: %v, want the host's answer that it serves none", err)
	}

	other := newPKI(t, "another CA", 3)
	for _, tc := range []struct {
		name   string
		client *tls.Config
		log    string
	}{
		{"no client certificate", &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS13}, "TLS handshake failed"},
		{"certificate of another CA", &tls.Config{Certificates: []tls.Certificate{other.cert(t, 2)}, RootCAs: ca.pool, MinVersion: tls.VersionTLS13}, "TLS handshake failed"},
		{"another node's certificate", ca.client(t, 3), "peer's certificate refused"},
		{"no TLS", nil, "TLS handshake failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, logged := c.nodes[1].tr.Stats(), strings.Count(c.logs.String(), tc.log)
			tr, err := tcptransport.New(tcptransport.Config{Node: 2, ClusterID: "test", ClientTLS: tc.client,
				Peers: map[multiraft.NodeID]string{1: c.nodes[1].addr}, Logger: c.log})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			tr.Send(multiraft.Batch{From: 2, To: 1})
			waitFor(t, 5*time.Second, "the listener refuses the dialler, and the dialler sees it", func() bool {
				return c.nodes[1].tr.Stats().Refused > before.Refused && tr.Stats().DialFailures > 0
			})
			if strings.Count(c.logs.String(), tc.log) == logged {
				t.Fatalf("no log line %q for the refusal", tc.log)
			}
			if st := tr.Stats(); st.BatchesSent != 0 {
				t.Fatalf("refused dialler: %+v", st)
			}
			served := c.nodes[1].tr.Stats().RequestsServed
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := tr.Request(ctx, 1, c.groupIDs()[0], []byte("x")); err == nil || errors.As(err, &re) {
				t.Fatalf("refused dialler's request: %v, want a refusal", err)
			}
			if n := c.nodes[1].tr.Stats().RequestsServed; n != served {
				t.Fatalf("the refused dialler's request was served")
			}
		})
	}
}
