package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// TestCLIClientsOverTLS: the clients operators reach for, configured as
// docs/security.md ("Certificates with openssl") says — curl with
// --cacert (and a client certificate), the sluice CLI with --tls-ca (and
// one), kcat with security.protocol=SSL, the AWS CLI with --ca-bundle —
// work against `sluice serve`'s TLS
// listeners. A client that is not installed fails its subtest
// (testproc.Missing; scripts/test-deps.sh installs them all).
func TestCLIClientsOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the sluice binary")
	}
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed ("+err.Error()+"): apt-get install openssl")
	}
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir, "cli")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("server", "sluice", 1)
	if err != nil {
		t.Fatal(err)
	}
	billing, err := ca.Issue("billing", "billing", 2)
	if err != nil {
		t.Fatal(err)
	}
	p := testproc.Serve(t, binary, "--data-dir", filepath.Join(dir, "data"), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "127.0.0.1:0", "--sqs-addr", "", "--http-tls-addr", "127.0.0.1:0",
		"--kafka-tls-addr", "127.0.0.1:0", "--sqs-tls-addr", "127.0.0.1:0",
		"--tls-cert", srv.Cert, "--tls-key", srv.Key, "--tls-client-ca", ca.Cert)
	httpsAddr, kafkaAddr, sqsAddr := p.Addr("http-tls"), p.Addr("kafka-tls"), p.Addr("sqs-tls")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run := func(t *testing.T, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	t.Run("curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			testproc.Missing(t, "curl is not installed: apt-get install curl")
		}
		if got := run(t, nil, "curl", "-sS", "--cacert", ca.Cert, "https://"+httpsAddr+"/healthz"); got != "ok\n" {
			t.Errorf("curl https: %q", got)
		}
		if got := run(t, nil, "curl", "-sS", "--cacert", ca.Cert, "--cert", billing.Cert, "--key", billing.Key,
			"https://"+httpsAddr+"/healthz"); got != "ok\n" {
			t.Errorf("curl with a client certificate: %q", got)
		}
		if got := run(t, nil, "curl", "-sS", "http://"+httpsAddr+"/healthz"); !strings.Contains(got, "HTTPS") {
			t.Errorf("curl http:// to the TLS port: %q, want the 400 that says to use HTTPS", got)
		}
	})

	t.Run("sluice CLI", func(t *testing.T) {
		run(t, nil, binary, "queue", "create", "tls-cli", "--server", "https://"+httpsAddr, "--tls-ca", ca.Cert,
			"--tls-client-cert", billing.Cert, "--tls-client-key", billing.Key)
		if got := run(t, nil, binary, "queue", "list", "--server", "https://"+httpsAddr, "--tls-ca", ca.Cert); !strings.Contains(got, "tls-cli") {
			t.Errorf("sluice queue list over https: %q", got)
		}
	})

	t.Run("kcat", func(t *testing.T) {
		if _, err := exec.LookPath("kcat"); err != nil {
			testproc.Missing(t, "kcat is not installed: apt-get install kcat")
		}
		ssl := []string{"-b", kafkaAddr, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.Cert}
		md := run(t, nil, "kcat", append(ssl, "-L")...)
		if !strings.Contains(md, "at "+kafkaAddr) {
			t.Errorf("kcat over TLS was not told the TLS listener %s:\n%s", kafkaAddr, md)
		}
		produce := exec.CommandContext(ctx, "kcat", append(ssl, "-P", "-t", "tls-orders")...)
		produce.Stdin = strings.NewReader("over tls\n")
		if out, err := produce.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P over TLS: %v\n%s", err, out)
		}
		mtls := append(ssl, "-X", "ssl.certificate.location="+billing.Cert, "-X", "ssl.key.location="+billing.Key)
		got := run(t, nil, "kcat", append(mtls, "-C", "-t", "tls-orders", "-o", "beginning", "-c", "1", "-e")...)
		if strings.TrimSpace(got) != "over tls" {
			t.Errorf("kcat -C with a client certificate: %q", got)
		}
	})

	t.Run("aws", func(t *testing.T) {
		cli := "/usr/bin/aws"
		if _, err := os.Stat(cli); err != nil {
			if cli, err = exec.LookPath("aws"); err != nil {
				testproc.Missing(t, "the AWS CLI is not installed: apt-get install awscli")
			}
		}
		home := t.TempDir()
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AWS_ACCESS_KEY_ID=dummy", "AWS_SECRET_ACCESS_KEY=dummy",
			"AWS_DEFAULT_REGION=us-east-1", "AWS_PAGER=", "AWS_EC2_METADATA_DISABLED=true",
			"AWS_CONFIG_FILE=" + filepath.Join(home, "config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "credentials")}
		out := run(t, env, cli, "--endpoint-url", "https://"+sqsAddr, "--ca-bundle", ca.Cert, "--output", "json",
			"sqs", "create-queue", "--queue-name", "tls-jobs")
		var q struct{ QueueUrl string }
		if err := json.Unmarshal([]byte(out), &q); err != nil || !strings.HasPrefix(q.QueueUrl, "https://"+sqsAddr+"/") {
			t.Fatalf("create-queue over https: %v %q", err, out)
		}
		// AWS_CA_BUNDLE is what boto3 reads too.
		out = run(t, append(env, "AWS_CA_BUNDLE="+ca.Cert), cli, "--endpoint-url", "https://"+sqsAddr, "--output", "json",
			"sqs", "list-queues")
		if !strings.Contains(out, q.QueueUrl) {
			t.Errorf("list-queues with AWS_CA_BUNDLE: %q", out)
		}
	})
	p.Stop()
}

// TestSecureSetupEndToEnd: docs/security.md's secure setup on the real
// binary — an auth file, every listener beyond the plaintext ones on TLS
// with a client CA — lets a client certificate's CN act as its user: the
// CLI over HTTPS with billing's certificate may create a queue billing's
// rule allows, is refused one it does not, and without a credential is
// refused as unauthenticated; kcat over the Kafka TLS listener with the
// same certificate produces and consumes billing's topic.
func TestSecureSetupEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the sluice binary")
	}
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed ("+err.Error()+"): apt-get install openssl")
	}
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir, "secure")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("server", "sluice", 1)
	if err != nil {
		t.Fatal(err)
	}
	billing, err := ca.Issue("billing", "billing", 2)
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "users.yaml")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sluice := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := sluice("acl", "add", "--auth-file", users, "--user", "billing", "--allow", "all",
		"--resource", "queue:billing-*", "--resource", "topic:billing-*"); err != nil {
		t.Fatalf("acl add: %v\n%s", err, out)
	}
	p := testproc.Serve(t, binary, "--data-dir", filepath.Join(dir, "data"), "--auth-file", users,
		"--http-addr", "127.0.0.1:0", "--kafka-addr", "", "--sqs-addr", "", "--http-tls-addr", "127.0.0.1:0",
		"--kafka-tls-addr", "127.0.0.1:0",
		"--tls-cert", srv.Cert, "--tls-key", srv.Key, "--tls-client-ca", ca.Cert)
	https := "https://" + p.Addr("http-tls")
	kafkaAddr := p.Addr("kafka-tls")
	asBilling := []string{"--server", https, "--tls-ca", ca.Cert, "--tls-client-cert", billing.Cert, "--tls-client-key", billing.Key}

	if out, err := sluice(append([]string{"queue", "create", "billing-invoices"}, asBilling...)...); err != nil {
		t.Fatalf("billing creating its own queue over mTLS: %v\n%s", err, out)
	}
	if out, err := sluice(append([]string{"queue", "create", "payroll"}, asBilling...)...); err == nil || !strings.Contains(strings.ToLower(out), "permission") {
		t.Errorf("billing creating a queue its rule does not cover: %v\n%s (want a permission refusal)", err, out)
	}
	if out, err := sluice("queue", "list", "--server", https, "--tls-ca", ca.Cert); err == nil || !strings.Contains(strings.ToLower(out), "unauthenticated") {
		t.Errorf("no credential over TLS: %v\n%s (want unauthenticated)", err, out)
	}

	// Kafka over the TLS listener: the same certificate is the same user.
	if _, err := exec.LookPath("kcat"); err != nil {
		testproc.Missing(t, "kcat is not installed: apt-get install kcat")
	}
	mtls := []string{"-b", kafkaAddr, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.Cert,
		"-X", "ssl.certificate.location=" + billing.Cert, "-X", "ssl.key.location=" + billing.Key}
	produce := exec.CommandContext(ctx, "kcat", append(mtls, "-P", "-t", "billing-events")...)
	produce.Stdin = strings.NewReader("paid\n")
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P as billing over mTLS: %v\n%s", err, out)
	}
	got, err := exec.CommandContext(ctx, "kcat", append(mtls, "-C", "-t", "billing-events", "-o", "beginning", "-c", "1", "-e")...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "paid" {
		t.Errorf("kcat -C as billing over mTLS: %v %q", err, got)
	}
	p.Stop()
}
