package broker

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

func openDir(t *testing.T, fsys vfs.FS, dir string) (*Broker, error) {
	t.Helper()
	// testHeadroom: the default 64 MiB headroom, zeros written into a MemFS, cost
	// TestDirLockNotOnMemFS 17 s under -race; the lock is what these tests check.
	b, err := Open(Options{Dir: dir, FS: fsys, Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err == nil {
		t.Cleanup(func() { b.Close() })
	}
	return b, err
}

// TestDirLockInProcess: a data directory on the real file system is held
// by one open broker at a time; Close (and only Close) hands it on.
func TestDirLockInProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		// steps run in order against one directory: "open" must succeed,
		// "locked" must fail with ErrDirLocked, "close" closes the most
		// recently opened broker.
		steps []string
	}{
		{"second open while the first is open fails", []string{"open", "locked"}},
		{"open after close succeeds", []string{"open", "close", "open"}},
		{"a refused open leaves the holder's lock alone", []string{"open", "locked", "locked", "close", "open", "locked"}},
		{"close, open, close, open", []string{"open", "close", "open", "close", "open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var open []*Broker
			for i, step := range tc.steps {
				switch step {
				case "open":
					b, err := openDir(t, vfs.Default, dir)
					if err != nil {
						t.Fatalf("step %d: open: %v", i, err)
					}
					open = append(open, b)
				case "locked":
					_, err := openDir(t, vfs.Default, dir)
					if !errors.Is(err, ErrDirLocked) {
						t.Fatalf("step %d: open = %v; want ErrDirLocked", i, err)
					}
					if !strings.Contains(err.Error(), dir) {
						t.Fatalf("step %d: error %q does not name the directory %s", i, err, dir)
					}
				case "close":
					if err := open[len(open)-1].Close(); err != nil {
						t.Fatalf("step %d: close: %v", i, err)
					}
					open = open[:len(open)-1]
				}
			}
		})
	}
}

// TestDirLockNotOnMemFS: an in-memory FS is private to its process, so it
// is not locked (the crash tests open a second broker beside an abandoned
// one).
func TestDirLockNotOnMemFS(t *testing.T) {
	mem := vfs.NewMem()
	if _, err := openDir(t, mem, "/data"); err != nil {
		t.Fatal(err)
	}
	if _, err := openDir(t, mem, "/data"); err != nil {
		t.Fatalf("second open on a MemFS: %v", err)
	}
	if _, err := mem.Stat("/data/" + vfs.LockFile); err == nil {
		t.Fatal("a LOCK file was created on the MemFS")
	}
}

// The lock test's child: with SLUICE_DIRLOCK_DIR set, TestDirLockChild
// opens a broker there, prints "holding" and waits to be killed.
const dirLockEnv = "SLUICE_DIRLOCK_DIR"

func TestDirLockChild(t *testing.T) {
	dir := os.Getenv(dirLockEnv)
	if dir == "" {
		t.Skip("run by TestDirLockOtherProcess as its child process")
	}
	if _, err := Open(Options{Dir: dir, Logger: quietLogger()}); err != nil {
		fmt.Println("open-failed", err)
		os.Exit(2)
	}
	fmt.Println("holding")
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	<-c // SIGKILL ends it first
}

// TestDirLockOtherProcess: while another process holds the directory, Open
// fails at once with ErrDirLocked; once that process is killed with
// SIGKILL (no Close, no cleanup), the kernel has dropped its lock and Open
// succeeds.
func TestDirLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	held := false
	runKillChild(t, "TestDirLockChild", dirLockEnv, dir, 0, func(line string) {
		if line != "holding" {
			t.Errorf("child: %s", line)
			return
		}
		held = true
		b, err := Open(Options{Dir: dir, Logger: quietLogger()})
		if err == nil {
			b.Close()
			t.Error("opened a directory another process holds")
		} else if !errors.Is(err, ErrDirLocked) || !strings.Contains(err.Error(), dir) {
			t.Errorf("open while the child holds the directory: %v; want ErrDirLocked naming %s", err, dir)
		}
	})
	if !held {
		t.Fatal("the child never held the directory")
	}
	b, err := Open(Options{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("open after the holder was killed: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
