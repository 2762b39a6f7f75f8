package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the sluice binary TestMain builds once for every test.
var binary string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "sluice-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", binary, "../cmd/sluice").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// proc is one running `sluice serve`.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string // the HTTP listener, host:port
	url  string

	mu     sync.Mutex // guards logs
	logs   []string
	done   chan struct{} // closed when stderr reached EOF
	waited bool
}

// start runs `sluice serve` on dataDir with free ports and waits until it
// is ready. The process is killed at cleanup if the test did not stop it.
func start(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the sluice binary")
	}
	args := append([]string{"serve", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "", "--sqs-addr", "", "--log-format", "json"}, extra...)
	p := &proc{t: t, cmd: exec.Command(binary, args...), done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !p.waited {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	addrc := make(chan string, 1)
	// The log reader is owned by the process: it ends at EOF, when the
	// process exits.
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs = append(p.logs, line)
			p.mu.Unlock()
			var l struct{ Msg, Listener, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.Listener == "http" {
				select {
				case addrc <- l.Addr:
				default:
				}
			}
		}
	}()
	select {
	case p.addr = <-addrc:
	case <-p.done:
		t.Fatalf("sluice exited before listening:\n%s", p.logText())
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice did not listen within 30s:\n%s", p.logText())
	}
	p.url = "http://" + p.addr
	p.waitReady()
	return p
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs, "\n")
}

// waitReady polls /readyz: bounded, because it waits on another process.
func (p *proc) waitReady() {
	p.t.Helper()
	for range 200 {
		if code, _ := get(p.url + "/readyz"); code == 200 {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	p.t.Fatalf("sluice never became ready:\n%s", p.logText())
}

// stop sends SIGTERM and expects a clean exit 0 within 30s.
func (p *proc) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("sluice did not exit within 30s of SIGTERM:\n%s", p.logText())
	}
	err := p.cmd.Wait()
	p.waited = true
	if err != nil {
		p.t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logText())
	}
}
