package sqs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQueryProtocolGoSDK126 runs testdata/sdk126 against this package's
// handler.
func TestQueryProtocolGoSDK126(t *testing.T) {
	t.Parallel() // slow: real time or an external process
	runSDK126(t, newEnv(t).endpoint)
}

// runSDK126 runs testdata/sdk126, a module of its own that pins
// aws-sdk-go-v2/service/sqs v1.26.0 (the last query-protocol release),
// against the SQS endpoint at base URL endpoint (SLUICE_SQS_ENDPOINT). The
// first run fetches that module through the Go module proxy; later runs use
// the module and build caches.
func runSDK126(t *testing.T, endpoint string) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build testdata/sdk126")
	}
	dir, err := filepath.Abs("testdata/sdk126")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "test", "-count=1", "-v", ".")
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "SLUICE_SQS_ENDPOINT="+endpoint, "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in testdata/sdk126: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
