// Package testproc runs the real `sluice serve` binary for end-to-end and
// interop tests: it builds cmd/sluice, starts it on free 127.0.0.1 ports,
// learns each listener's bound address from the JSON "listening" log lines,
// and stops it with SIGTERM expecting exit code 0.
//
// It is test support (it imports testing) and must never be imported by the
// broker or the binary; deps_test.go allows it alongside sluicetest.
package testproc

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is one running `sluice serve`.
type Proc struct {
	t   testing.TB
	cmd *exec.Cmd

	mu      sync.Mutex // guards logs, addrs, exited
	logs    []string
	addrs   map[string]string // listener name -> bound address
	exited  bool
	changed chan struct{} // closed and replaced when logs or addrs change

	done chan struct{} // closed when the log reader reached EOF (the process exited)
}

// Serve runs `bin serve` with the given flags (data dir, listener addresses,
// …; "--log-format json" is added) and returns at once. SLUICE_* variables
// of the caller's environment are not passed on. The process is killed at
// cleanup unless Stop ended it.
func Serve(t testing.TB, bin string, flags ...string) *Proc {
	t.Helper()
	return Run(t, bin, append([]string{"serve", "--log-format", "json"}, flags...)...)
}

// Run runs bin with args (any subcommand that logs JSON lines to stderr,
// "listening" lines included, such as `sluice outbox relay --log-format
// json`) and returns at once, as Serve does.
func Run(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, cmd: exec.Command(bin, args...), addrs: map[string]string{},
		changed: make(chan struct{}), done: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := startWithParent(p.cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		if !exited {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	go p.readLogs(bufio.NewScanner(stderr)) // ends at EOF, when the process exits
	return p
}

func (p *Proc) readLogs(sc *bufio.Scanner) {
	defer close(p.done)
	for sc.Scan() {
		line := sc.Text()
		var l struct{ Msg, Listener, Addr string }
		p.mu.Lock()
		p.logs = append(p.logs, line)
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" {
			p.addrs[l.Listener] = l.Addr
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

// Addr waits (30 s at most) for listener's "listening" line ("http",
// "kafka" or "sqs") and returns its bound host:port.
func (p *Proc) Addr(listener string) string {
	p.t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		p.mu.Lock()
		addr, changed := p.addrs[listener], p.changed
		p.mu.Unlock()
		if addr != "" {
			return addr
		}
		select {
		case <-changed:
		case <-p.done:
			p.t.Fatalf("sluice exited before its %s listener was up:\n%s", listener, p.Logs())
		case <-timeout.C:
			p.t.Fatalf("no %s listening line within 30s:\n%s", listener, p.Logs())
		}
	}
}

// Problems returns the last n lines the process logged at level WARN or ERROR.
func (p *Proc) Problems(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, line := range p.logs {
		var l struct{ Level string }
		if json.Unmarshal([]byte(line), &l) == nil && (l.Level == "WARN" || l.Level == "ERROR") {
			out = append(out, line)
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

// Logs returns everything the process logged so far.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs, "\n")
}

// Stop sends SIGTERM and fails the test unless the process exits with code
// 0 within 30 s.
func (p *Proc) Stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("sluice did not exit within 30s of SIGTERM:\n%s", p.Logs())
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	if err != nil {
		p.t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Logs())
	}
}

// Signal sends sig to the process (SIGHUP: reload the TLS certificate).
func (p *Proc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// Kill sends SIGKILL, a crash at whatever moment the process is in, and
// waits for it to be gone.
func (p *Proc) Kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	<-p.done
	_ = p.cmd.Wait()
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
}

// Stacks ends the process with SIGQUIT, on which the Go runtime prints every goroutine's
// stack to stderr before it exits, and returns that dump (empty if the process had ended
// already or printed none within 10 s). For a test that failed on a process that stopped
// making progress: which goroutine waits on what.
func (p *Proc) Stacks() string {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited || p.cmd.Process.Signal(syscall.SIGQUIT) != nil {
		return ""
	}
	select {
	case <-p.done:
		_ = p.cmd.Wait()
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
	case <-time.After(10 * time.Second):
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, l := range p.logs {
		if strings.HasPrefix(l, "SIGQUIT") {
			return strings.Join(p.logs[i:], "\n")
		}
	}
	return ""
}

// Goroutines returns the goroutines of a Stacks dump whose stack mentions any of frames
// (a function name such as "broker.(*clusterRT).run"), blank-line separated as the runtime
// prints them.
func Goroutines(dump string, frames ...string) string {
	var keep []string
	for _, g := range strings.Split(dump, "\n\n") {
		for _, f := range frames {
			if strings.Contains(g, f) {
				keep = append(keep, g)
				break
			}
		}
	}
	return strings.Join(keep, "\n\n")
}
