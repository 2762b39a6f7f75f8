package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChildDiesWithTestBinary runs this test binary again as a stand-in for a test that
// starts a server through Run, SIGKILLs it (no cleanup runs), and checks that the child it
// started is gone too.
func TestChildDiesWithTestBinary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signals are Linux only")
	}
	if os.Getenv("TESTPROC_CHILD_PARENT") == "1" {
		p := Run(t, "/bin/sleep", "120")
		fmt.Printf("child %d\n", p.cmd.Process.Pid)
		time.Sleep(2 * time.Minute) // killed by the outer test long before
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChildDiesWithTestBinary$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTPROC_CHILD_PARENT=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := readChildPid(t, out)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && !isZombie(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d outlived its killed parent by 10 s", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readChildPid(t *testing.T, out interface{ Read([]byte) (int, error) }) int {
	t.Helper()
	var buf []byte
	b := make([]byte, 256)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := out.Read(b)
		buf = append(buf, b[:n]...)
		for _, line := range strings.Split(string(buf), "\n") {
			if s, ok := strings.CutPrefix(line, "child "); ok {
				if pid, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && strings.Contains(string(buf), s+"\n") {
					return pid
				}
			}
		}
		if err != nil {
			t.Fatalf("helper ended before naming its child: %v\n%s", err, buf)
		}
	}
	t.Fatalf("no child pid from the helper:\n%s", buf)
	return 0
}

// isZombie: a killed child reparented to a subreaper that has not reaped it yet.
func isZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
