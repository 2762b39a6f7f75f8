package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOSFSCreatesPrivateFiles: what the data directory holds is readable
// by the broker's user only, whatever the umask lets through (docs/security.md,
// "Safe defaults"); a directory made before keeps its mode and still works.
func TestOSFSCreatesPrivateFiles(t *testing.T) {
	old := syscall.Umask(0) // the widest umask: only the code's modes count
	defer syscall.Umask(old)
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	if err := MkdirAllDurable(Default, dir); err != nil {
		t.Fatal(err)
	}
	f, err := Default.Create(filepath.Join(dir, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := WriteFileAtomic(Default, dir, "meta.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	lock, err := LockDir(Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()

	for _, tc := range []struct {
		path string
		want fs.FileMode
	}{
		{filepath.Join(root, "a"), DirPerm}, {dir, DirPerm},
		{filepath.Join(dir, "seg"), FilePerm}, {filepath.Join(dir, "meta.json"), FilePerm},
		{filepath.Join(dir, LockFile), FilePerm},
	} {
		st, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != tc.want {
			t.Errorf("%s: mode %v, want %v", tc.path, got, tc.want)
		}
	}

	// An existing, wider directory is left as it is and still used.
	legacy := filepath.Join(root, "legacy")
	if err := os.Mkdir(legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllDurable(Default, legacy); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(Default, legacy, "x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(legacy); st.Mode().Perm() != 0o755 {
		t.Errorf("existing directory's mode changed to %v", st.Mode().Perm())
	}
}
