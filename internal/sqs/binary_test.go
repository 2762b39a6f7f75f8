package sqs_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRealBinary runs `sluice serve` as built, finds its SQS listener in the
// "listening" log line and drives it with the clients the in-process tests
// use, through the same helpers: aws-sdk-go-v2 over JSON, the module pinned
// to the query-protocol SDK v1.26, the AWS CLI and boto3. What CI's clients
// meet is then the production wiring (cmd/sluice mounts the handler), not a
// test harness. The clients run in parallel on queues of their own names.
func TestRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test builds cmd/sluice and runs sluice serve")
	}
	p := startSluice(t)
	sdk := func(scenario func(*env)) func(*testing.T) {
		return func(t *testing.T) { scenario(newClientEnv(t, p.endpoint)) }
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
		{"QueryProtocolGoSDK126", func(t *testing.T) { runSDK126(t, p.endpoint) }},
		{"AWSCLI", func(t *testing.T) { runAWSCLI(t, p.endpoint) }},
		{"Boto3", func(t *testing.T) { runBoto3(t, p.endpoint) }},
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
	p.terminate(t)
}

// sluiceProcess is a running `sluice serve`.
type sluiceProcess struct {
	cmd      *exec.Cmd
	endpoint string        // the SQS listener's base URL
	logs     chan []string // its last log lines, once stderr reaches EOF
	exited   bool
}

// startSluice builds cmd/sluice and starts it with a temporary data
// directory, its SQS and HTTP listeners on free 127.0.0.1 ports and Kafka
// off, and waits (30 s at most) for the SQS "listening" log line. The
// process is killed at cleanup unless terminate ended it.
func startSluice(t *testing.T) *sluiceProcess {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-mq/sluice/cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "", "--sqs-addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "info")
	// No SLUICE_* settings from the caller's environment.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &sluiceProcess{cmd: cmd, logs: make(chan []string, 1)}
	t.Cleanup(func() {
		if !p.exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	addrc := make(chan string, 1)
	go func() { // owned by the test: ends at EOF, when the process exits
		var last []string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if last = append(last, sc.Text()); len(last) > 50 {
				last = last[1:]
			}
			var l struct{ Msg, Listener, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" && l.Listener == "sqs" {
				addrc <- l.Addr
			}
		}
		p.logs <- last
	}()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case addr := <-addrc:
		p.endpoint = "http://" + addr
	case logs := <-p.logs:
		p.exited = true
		t.Fatalf("sluice serve exited before listening: %v\n%s", cmd.Wait(), strings.Join(logs, "\n"))
	case <-timeout.C:
		t.Fatal("no sqs listening line within 30s")
	}
	return p
}

// terminate sends SIGTERM and expects exit code 0 within 30 s.
func (p *sluiceProcess) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case logs := <-p.logs:
		p.exited = true
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, strings.Join(logs, "\n"))
		}
	case <-timeout.C:
		t.Fatal("still running 30s after SIGTERM")
	}
}
