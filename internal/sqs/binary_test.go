package sqs_test

import (
	"testing"

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
