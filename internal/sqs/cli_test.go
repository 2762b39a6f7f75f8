package sqs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// The AWS CLI and boto3 against a real listener. Debian's packages (awscli
// 2.9, python3-boto3 1.26, under /usr/bin) speak the query protocol; a
// newer aws or boto3 on PATH speaks JSON. Each one found is run; with none,
// the test is skipped and says what to install.

// clientPaths returns the distinct executables among candidates that exist.
func clientPaths(candidates ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range candidates {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		out = append(out, p)
	}
	return out
}

// clientEnv keeps the clients off any real AWS configuration.
func clientEnv(t *testing.T) []string { return clientEnvAs(t, "dummy", "dummy") }

// clientEnvAs is clientEnv with the access key id and secret given.
func clientEnvAs(t *testing.T, keyID, secret string) []string {
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "AWS_ACCESS_KEY_ID="+keyID, "AWS_SECRET_ACCESS_KEY="+secret,
		"AWS_DEFAULT_REGION=us-east-1", "AWS_REGION=us-east-1", "AWS_PAGER=", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE="+filepath.Join(home, "config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "credentials"),
		"AWS_DEFAULT_OUTPUT=json")
}

func run(t *testing.T, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func TestAWSCLI(t *testing.T) {
	t.Parallel() // slow: real time or an external process
	runAWSCLI(t, newEnv(t).endpoint)
}

// runAWSCLI drives the SQS endpoint at base URL endpoint with each AWS CLI
// found, in a subtest and on a queue of its own.
func runAWSCLI(t *testing.T, endpoint string) { runAWSCLIAs(t, endpoint, "dummy", "dummy") }

// runAWSCLIAs is runAWSCLI signing with the access key given.
func runAWSCLIAs(t *testing.T, endpoint, keyID, secret string) {
	clis := clientPaths("/usr/bin/aws", "aws")
	if len(clis) == 0 {
		testproc.Missing(t, "no AWS CLI: install Debian's awscli (apt-get install awscli) to run this test")
	}
	for i, cli := range clis {
		t.Run(strings.ReplaceAll(cli, "/", "_"), func(t *testing.T) {
			name := fmt.Sprintf("cli-q%d", i)
			env := clientEnvAs(t, keyID, secret)
			aws := func(args ...string) map[string]any {
				out := run(t, env, cli, append([]string{"--endpoint-url", endpoint, "--region", "us-east-1", "--output", "json", "sqs"}, args...)...)
				var v map[string]any
				if len(strings.TrimSpace(string(out))) > 0 {
					if err := json.Unmarshal(out, &v); err != nil {
						t.Fatalf("%s: %v in %s", args[0], err, out)
					}
				}
				return v
			}
			t.Log(strings.TrimSpace(string(run(t, env, cli, "--version"))))
			url, _ := aws("create-queue", "--queue-name", name)["QueueUrl"].(string)
			if !strings.HasSuffix(url, "/000000000000/"+name) {
				t.Fatalf("QueueUrl %q", url)
			}
			aws("send-message", "--queue-url", url, "--message-body", "hello from the CLI",
				"--message-attributes", `{"color":{"DataType":"String","StringValue":"blue"}}`)
			got := aws("receive-message", "--queue-url", url, "--attribute-names", "All", "--message-attribute-names", "All")
			msgs, _ := got["Messages"].([]any)
			if len(msgs) != 1 {
				t.Fatalf("receive-message: %v", got)
			}
			m := msgs[0].(map[string]any)
			if m["Body"] != "hello from the CLI" {
				t.Fatalf("message %v", m)
			}
			aws("delete-message", "--queue-url", url, "--receipt-handle", m["ReceiptHandle"].(string))
			attrs := aws("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")["Attributes"].(map[string]any)
			if attrs["ApproximateNumberOfMessages"] != "0" || attrs["ApproximateNumberOfMessagesNotVisible"] != "0" {
				t.Fatalf("attributes after delete: %v", attrs)
			}
			aws("delete-queue", "--queue-url", url)
		})
	}
}

func TestBoto3(t *testing.T) {
	t.Parallel() // slow: real time or an external process
	runBoto3(t, newEnv(t).endpoint)
}

// runBoto3 runs testdata/boto3_smoke.py against the SQS endpoint at base URL
// endpoint with each python3 that has boto3, in a subtest and on queues of
// its own.
func runBoto3(t *testing.T, endpoint string) {
	var pythons []string
	for _, p := range clientPaths("/usr/bin/python3", "python3") {
		if exec.Command(p, "-c", "import boto3").Run() == nil {
			pythons = append(pythons, p)
		}
	}
	if len(pythons) == 0 {
		testproc.Missing(t, "no boto3: install Debian's python3-boto3 (apt-get install python3-boto3) to run this test")
	}
	script, err := filepath.Abs("testdata/boto3_smoke.py")
	if err != nil {
		t.Fatal(err)
	}
	for i, py := range pythons {
		t.Run(strings.ReplaceAll(py, "/", "_"), func(t *testing.T) {
			out := run(t, clientEnv(t), py, script, endpoint, fmt.Sprintf("boto3-q%d", i))
			t.Log(strings.TrimSpace(string(out)))
			if !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
				t.Fatalf("script did not finish: %s", out)
			}
		})
	}
}
