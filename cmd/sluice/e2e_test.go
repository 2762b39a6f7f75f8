package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildBinary compiles the real sluice binary, as a user would get it.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// logLine is the part of sluice's JSON log lines this test reads.
type logLine struct {
	Msg      string `json:"msg"`
	Listener string `json:"listener"`
	Addr     string `json:"addr"`
}

// TestServeEndToEnd starts `sluice serve` on free ports, finds the HTTP
// address in its "listening" log line, checks health, readiness and
// metrics, then sends SIGTERM and expects a clean exit 0.
func TestServeEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "127.0.0.1:0", "--sqs-addr", "127.0.0.1:0", "--log-format", "json")
	cmd.Env = append(os.Environ(), "SLUICE_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})

	// The reader goroutine is owned by this test: it ends at EOF, when the
	// process exits, and logsDone tells cmd.Wait it may run.
	lines, logsDone := make(chan logLine, 64), make(chan []string, 1)
	go func() {
		var raw []string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			raw = append(raw, sc.Text())
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				select {
				case lines <- l:
				default: // the test stopped listening; keep draining
				}
			}
		}
		logsDone <- raw
	}()

	httpAddr := waitForLog(t, lines, func(l logLine) bool { return l.Msg == "listening" && l.Listener == "http" }).Addr
	base := "http://" + httpAddr
	waitForStatus(t, base+"/healthz", http.StatusOK)
	waitForStatus(t, base+"/readyz", http.StatusOK)
	if code, body := httpGet(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "sluice_build_info") {
		t.Errorf("/metrics = %d; body lacks sluice_build_info", code)
	}
	// The native API is mounted and wired to the broker: a send to a queue
	// that does not exist answers not_found with the QUEUE_NOT_FOUND reason.
	resp, err := http.Post(base+"/sluice.v1.QueueService/Send", "application/json",
		strings.NewReader(`{"queue":"emails","message":{"body":"aGVsbG8="}}`))
	if err != nil {
		t.Fatal(err)
	}
	apiBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(apiBody), `"code":"not_found"`) || !strings.Contains(string(apiBody), `QUEUE_NOT_FOUND`) {
		t.Errorf("QueueService/Send = %d %s; want not_found with reason QUEUE_NOT_FOUND", resp.StatusCode, apiBody)
	}
	if fi, err := os.Stat(dataDir); err != nil || !fi.IsDir() {
		t.Errorf("data dir not created: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var raw []string
	select {
	case raw = <-logsDone:
	case <-time.After(15 * time.Second):
		t.Fatal("sluice did not exit within 15s of SIGTERM")
	}
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v; logs:\n%s", err, strings.Join(raw, "\n"))
	}
	all := strings.Join(raw, "\n")
	for _, want := range []string{`"msg":"listening","listener":"kafka"`, `"msg":"listening","listener":"sqs"`, `"msg":"shutdown complete"`} {
		if !strings.Contains(all, want) {
			t.Errorf("logs lack %q:\n%s", want, all)
		}
	}
}

func TestServeRejectsBadFlagWithOneLine(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "serve", "--fsync", "sometimes").CombinedOutput()
	if exitErr, ok := err.(*exec.ExitError); !ok || exitErr.ExitCode() != 1 {
		t.Fatalf("exit: %v, want code 1", err)
	}
	if got := strings.TrimSpace(string(out)); strings.Contains(got, "\n") || !strings.HasPrefix(got, "sluice: --fsync:") {
		t.Errorf("output %q: want one line starting with \"sluice: --fsync:\"", got)
	}
}

func waitForLog(t *testing.T, lines <-chan logLine, match func(logLine) bool) logLine {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-lines:
			if match(l) {
				return l
			}
		case <-deadline:
			t.Fatal("sluice did not log the expected line within 30s")
		}
	}
}

// waitForStatus polls url until it answers want; bounded, because it waits
// on another process.
func waitForStatus(t *testing.T, url string, want int) {
	t.Helper()
	var code int
	for range 100 {
		if code, _ = httpGet(t, url); code == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: last status %d, want %d", url, code, want)
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
