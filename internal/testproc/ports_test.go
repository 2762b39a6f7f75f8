package testproc

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStableAddrIsReservedAcrossProcesses: a port handed out stays locked for this process,
// so another test binary's StableAddr (its own open of the lock file: a different open file
// description, as in another process) cannot take it while the node on it is down.
func TestStableAddrIsReservedAcrossProcesses(t *testing.T) {
	_, port, err := net.SplitHostPort(StableAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(os.TempDir(), "sluice-test-ports", port))
	if err != nil {
		t.Fatalf("no lock file for port %s: %v", port, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatalf("port %s could be reserved again: another test binary would take it", port)
	}
}
