package sqs_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestRealBinary runs `sluice serve` as built, finds its SQS listener in the
// "listening" log line and drives it with the clients the in-process tests
// use, through the same helpers: aws-sdk-go-v2 over JSON, the module pinned
// to the query-protocol SDK v1.26, the AWS CLI and boto3. What CI's clients
// meet is then the production assembly (internal/node mounts the handler), not a
// test harness. The clients run in parallel on queues of their own names.
func TestRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test builds cmd/sluice and runs sluice serve")
	}
	proc := testproc.Serve(t, testproc.Build(t, t.TempDir()), "--data-dir", t.TempDir(),
		"--http-addr", "127.0.0.1:0", "--kafka-addr", "", "--sqs-addr", "127.0.0.1:0")
	endpoint := "http://" + proc.Addr("sqs")
	sdk := func(scenario func(*env)) func(*testing.T) {
		return func(t *testing.T) { scenario(newClientEnv(t, endpoint)) }
	}
	clients := []struct {
		name string
		run  func(*testing.T)
	}{
		{"SendReceiveDeleteWithAttributes", sdk(sendReceiveDeleteWithAttributes)},
		{"RedrivePolicyDeadLetters", sdk(redrivePolicyDeadLetters)},
		{"LongPollWokenBySend", sdk(longPollWokenBySend)},
		{"ChangeMessageVisibility", sdk(changeMessageVisibility)},
		{"FIFOGroupsAndDedup", sdk(fifoGroupsAndDedup)},
		{"SeedWorkQueueTrace", sdk(seedWorkQueueTrace)},
		{"QueryProtocolGoSDK126", func(t *testing.T) { runSDK126(t, endpoint) }},
		{"AWSCLI", func(t *testing.T) { runAWSCLI(t, endpoint) }},
		{"Boto3", func(t *testing.T) { runBoto3(t, endpoint) }},
	}
	// Parallel subtests end before the group's t.Run returns.
	t.Run("clients", func(t *testing.T) {
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t)
			})
		}
	})
	proc.Stop()
}

// TestRealBinaryWithAuth runs `sluice serve --auth-file`: the node must
// hand the users file to the SQS front-end (signatures checked, rules
// applied), AddPermission must edit the file the server rereads, and the
// refusals must show in /metrics.
func TestRealBinaryWithAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test builds cmd/sluice and runs sluice serve")
	}
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte(clientUsersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := testproc.Serve(t, testproc.Build(t, t.TempDir()), "--data-dir", t.TempDir(), "--auth-file", users,
		"--http-addr", "127.0.0.1:0", "--kafka-addr", "", "--sqs-addr", "127.0.0.1:0")
	endpoint := "http://" + proc.Addr("sqs")
	alice := newClientEnvAs(t, endpoint, "AKIDALICE", "alice-secret")
	bob := newClientEnvAs(t, endpoint, "AKIDBOB", "bob-secret")
	url := alice.createQueue("bin-auth", nil)
	send := func(e *env) error {
		_, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")})
		return err
	}
	if err := send(alice); err != nil {
		t.Fatal(err)
	}
	wantCode(t, send(bob), "AccessDenied")
	wantCode(t, send(newClientEnvAs(t, endpoint, "AKIDALICE", "wrong")), "SignatureDoesNotMatch")
	if _, err := alice.c.AddPermission(alice.ctx, &awssqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("bob"),
		AWSAccountIds: []string{"bob"}, Actions: []string{"SendMessage"}}); err != nil {
		t.Fatal(err)
	}
	if err := send(bob); err != nil {
		t.Fatalf("bob after AddPermission: %v", err)
	}
	resp, err := http.Get("http://" + proc.Addr("http") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sluice_auth_failures_total{protocol="sqs",reason="denied"} 1`,
		`sluice_auth_failures_total{protocol="sqs",reason="bad_credentials"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	proc.Stop()
}
