package broker

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// runKillChild re-executes the test binary as a child running only the test
// named child, with env set to dir, and hands each line the child prints on
// stdout to record. d after the first line it SIGKILLs the child; it
// returns once every line the child wrote before dying has been recorded
// (or the child ended by itself). A child that is still running 20 s after
// its start is killed and fails the test.
func runKillChild(t *testing.T, child, env, dir string, d time.Duration, record func(line string)) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
	var kill <-chan time.Time
	armed := false
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				return
			}
			if !armed {
				armed, kill = true, time.After(d)
			}
			record(line)
		case <-kill:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			kill = nil
		case <-guard.C:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			t.Fatal("child printed nothing within 20 s")
		}
	}
}
