package sqs_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/sqs"
)

// The AWS CLI and boto3 over HTTPS, trusting a CA of the test's own
// through --ca-bundle and AWS_CA_BUNDLE, with authentication on. The TLS
// here is the test server's; the listener's own TLS (--tls-cert) is
// tested with it.

// testCA writes a fresh CA certificate to dir/ca.pem and returns a server
// certificate it signed for 127.0.0.1.
func testCA(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, path
}

// newHTTPSAuthEnv serves the authenticated handler over HTTPS and returns
// its URL and the CA bundle clients must trust.
func newHTTPSAuthEnv(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	users := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(users, []byte(clientUsersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := auth.Open(users, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cert, bundle := testCA(t, dir)
	srv := httptest.NewUnstartedServer(sqs.NewHandler(b, sqs.Config{Logger: quietLogger(), Auth: store}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusting client's aborted handshakes
	srv.StartTLS()
	t.Cleanup(func() {
		srv.Close()
		b.Close()
	})
	return srv.URL, bundle
}

func TestAWSCLIOverHTTPS(t *testing.T) {
	t.Parallel() // slow: external processes
	clis := clientPaths("/usr/bin/aws", "aws")
	if len(clis) == 0 {
		needClient(t, "no AWS CLI: install Debian's awscli (apt-get install awscli) to run this test")
	}
	endpoint, bundle := newHTTPSAuthEnv(t)
	if !strings.HasPrefix(endpoint, "https://") {
		t.Fatalf("endpoint %s", endpoint)
	}
	for i, cli := range clis {
		name := fmt.Sprintf("https-cli-%d", i)
		aws := func(env []string, args ...string) string {
			return string(run(t, env, cli, append([]string{"--endpoint-url", endpoint, "--ca-bundle", bundle, "--region", "us-east-1",
				"--output", "text", "sqs"}, args...)...))
		}
		alice := clientEnvAs(t, "AKIDALICE", "alice-secret")
		url := strings.TrimSpace(aws(alice, "create-queue", "--queue-name", name))
		if !strings.HasPrefix(url, "https://127.0.0.1:") {
			t.Fatalf("%s: QueueUrl %q", cli, url)
		}
		aws(alice, "send-message", "--queue-url", url, "--message-body", "over TLS")
		if got := aws(alice, "receive-message", "--queue-url", url, "--query", "Messages[0].Body"); strings.TrimSpace(got) != "over TLS" {
			t.Fatalf("%s: received %q", cli, got)
		}
		stderr := runFail(t, clientEnvAs(t, "AKIDALICE", "wrong-secret"), cli, "--endpoint-url", endpoint, "--ca-bundle", bundle,
			"--region", "us-east-1", "sqs", "list-queues")
		if !strings.Contains(stderr, "SignatureDoesNotMatch") {
			t.Fatalf("%s wrong secret over TLS: %s", cli, stderr)
		}
		// Without the bundle the server is not trusted.
		stderr = runFail(t, append(alice, "AWS_MAX_ATTEMPTS=1", "AWS_RETRY_MODE=standard"), cli, "--endpoint-url", endpoint, "--region", "us-east-1", "sqs", "list-queues")
		if !strings.Contains(strings.ToLower(stderr), "ssl") && !strings.Contains(strings.ToLower(stderr), "certificate") {
			t.Fatalf("%s without --ca-bundle: %s", cli, stderr)
		}
	}
}

func TestBoto3OverHTTPS(t *testing.T) {
	t.Parallel() // slow: external processes
	var pythons []string
	for _, p := range clientPaths("/usr/bin/python3", "python3") {
		if exec.Command(p, "-c", "import boto3").Run() == nil {
			pythons = append(pythons, p)
		}
	}
	if len(pythons) == 0 {
		needClient(t, "no boto3: install Debian's python3-boto3 (apt-get install python3-boto3) to run this test")
	}
	script, err := filepath.Abs("testdata/boto3_auth.py")
	if err != nil {
		t.Fatal(err)
	}
	endpoint, bundle := newHTTPSAuthEnv(t)
	for i, py := range pythons {
		out := run(t, append(clientEnv(t), "AWS_CA_BUNDLE="+bundle), py, script, endpoint, fmt.Sprintf("boto3-https-%d", i))
		if !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
			t.Fatalf("%s: script did not finish: %s", py, out)
		}
	}
}
