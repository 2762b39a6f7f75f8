package testproc

import (
	"fmt"
	"os/exec"
	"testing"
)

// MountTmpfs mounts a tmpfs of size MiB on a directory of the test's and unmounts it at
// the end: a real file system a test can fill (a full disk, ENOSPC from the kernel). It
// needs root (CI runs as root); elsewhere the test is skipped, saying why.
func MountTmpfs(t testing.TB, size int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", size), "sluice-test", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a %d MiB tmpfs to fill (needs root): %v %s", size, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// ResizeTmpfs gives the tmpfs MountTmpfs mounted on dir a new size, in MiB, as an
// operator who grows a full volume does.
func ResizeTmpfs(t testing.TB, dir string, size int) {
	t.Helper()
	out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%dm", size), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("resize the tmpfs on %s to %d MiB: %v %s", dir, size, err, out)
	}
}
