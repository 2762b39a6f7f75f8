package sqs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/sqs"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// Real clients against a listener with authentication on: the users file
// below, the server's own clock.

const clientUsersFile = `users:
  - name: alice
    access_keys: [{id: AKIDALICE, secret: alice-secret}]
  - name: bob
    access_keys: [{id: AKIDBOB, secret: bob-secret}]
acls:
  - {user: alice, allow: [all], resources: ["queue:*"]}
`

// newAuthEnv starts the handler with a users file and returns alice's
// SDK client of it.
func newAuthEnv(t *testing.T) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte(clientUsersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := auth.Open(path, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sqs.NewHandler(b, sqs.Config{Logger: quietLogger(), Auth: store}))
	t.Cleanup(func() {
		srv.Close()
		b.Close()
	})
	e := newClientEnvAs(t, srv.URL, "AKIDALICE", "alice-secret")
	e.b = b
	return e
}

// needClient fails a test whose client is not installed (testproc.Missing).
func needClient(t *testing.T, msg string) {
	t.Helper()
	testproc.Missing(t, msg)
}

func TestSDKWithKeys(t *testing.T) {
	e := newAuthEnv(t)
	url := e.createQueue("signed", nil)
	if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, secret, code string }{
		{"AKIDALICE", "wrong-secret", "SignatureDoesNotMatch"},
		{"AKIDNOBODY", "x", "InvalidClientTokenId"},
		{"AKIDBOB", "bob-secret", "AccessDenied"},
	} {
		other := newClientEnvAs(t, e.endpoint, c.id, c.secret)
		_, err := other.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("refused")})
		wantCode(t, err, c.code)
	}
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v %v", out, err)
	}
}

// An aws-sdk-go-v2 presigned SendMessage (its v4 signer's PresignHTTP on a
// query request) works until it expires.
func TestSDKPresignedURL(t *testing.T) {
	e := newAuthEnv(t)
	queue := e.createQueue("presigned", nil)
	presign := func(body string, signedAt time.Time, expires int) string {
		q := url.Values{"Action": {"SendMessage"}, "QueueUrl": {queue}, "MessageBody": {body}, "X-Amz-Expires": {fmt.Sprint(expires)}}
		r, err := http.NewRequest("GET", e.endpoint+"/?"+q.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(nil)
		u, _, err := v4.NewSigner().PresignHTTP(e.ctx, aws.Credentials{AccessKeyID: "AKIDALICE", SecretAccessKey: "alice-secret"},
			r, hex.EncodeToString(sum[:]), "sqs", "us-east-1", signedAt)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(presign("fresh", time.Now(), 300)); code != 200 || !strings.Contains(body, "<MessageId>") {
		t.Fatalf("presigned send: %d %s", code, body)
	}
	// Signed 20 minutes ago for 30 minutes: still valid, though beyond the
	// 15 minutes a header signature gets.
	if code, body := get(presign("long", time.Now().Add(-20*time.Minute), 1800)); code != 200 {
		t.Fatalf("presigned send within X-Amz-Expires: %d %s", code, body)
	}
	if code, body := get(presign("stale", time.Now().Add(-2*time.Minute), 60)); code != 400 || !strings.Contains(body, "<Code>RequestExpired</Code>") {
		t.Fatalf("expired presigned send: %d %s", code, body)
	}
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &queue, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 2 {
		t.Fatalf("receive: %v %v", out, err)
	}
}

func TestAWSCLIWithKeys(t *testing.T) {
	t.Parallel() // slow: external processes
	clis := clientPaths("/usr/bin/aws", "aws")
	if len(clis) == 0 {
		needClient(t, "no AWS CLI: install Debian's awscli (apt-get install awscli) to run this test")
	}
	e := newAuthEnv(t)
	url := e.createQueue("cli-refused", nil)
	for _, cli := range clis {
		// One signed call that works (TestAWSCLI runs the whole sequence
		// unsigned and TestAWSCLIOverHTTPS signed, each CLI start costing
		// seconds of CPU), then each refusal.
		out := run(t, clientEnvAs(t, "AKIDALICE", "alice-secret"), cli, "--endpoint-url", e.endpoint, "--region", "us-east-1",
			"--output", "json", "sqs", "send-message", "--queue-url", url, "--message-body", "signed by alice")
		if !strings.Contains(string(out), "MessageId") {
			t.Fatalf("%s as alice: %s", cli, out)
		}
		for _, c := range []struct{ id, secret, code string }{
			{"AKIDALICE", "wrong-secret", "SignatureDoesNotMatch"},
			{"AKIDNOBODY", "x", "InvalidClientTokenId"},
			{"AKIDBOB", "bob-secret", "AccessDenied"},
		} {
			stderr := runFail(t, clientEnvAs(t, c.id, c.secret), cli, "--endpoint-url", e.endpoint, "--region", "us-east-1",
				"sqs", "send-message", "--queue-url", url, "--message-body", "refused")
			if !strings.Contains(stderr, c.code) {
				t.Fatalf("%s as %s: stderr %q, want %s", cli, c.id, stderr, c.code)
			}
		}
	}
}

func TestBoto3WithKeys(t *testing.T) {
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
	e := newAuthEnv(t)
	for i, py := range pythons {
		out := run(t, clientEnv(t), py, script, e.endpoint, fmt.Sprintf("boto3-auth-%d", i))
		t.Log(strings.TrimSpace(string(out)))
		if !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
			t.Fatalf("%s: script did not finish: %s", py, out)
		}
	}
}

// runFail runs a command that must fail and returns its stderr.
func runFail(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("%s %s: %v, want it to fail\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(ee.Stderr)
}
