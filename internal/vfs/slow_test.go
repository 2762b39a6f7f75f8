package vfs

import (
	"path/filepath"
	"testing"
	"time"
)

// TestSlowSyncFS: a sync through it takes at least the delay and is recorded; a file of
// the OS keeps sendfile and preallocation, so storage takes its usual paths.
func TestSlowSyncFS(t *testing.T) {
	fs := &SlowSyncFS{FS: Default, Delay: func() time.Duration { return 5 * time.Millisecond }}
	f, err := fs.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(OSFile); !ok {
		t.Fatal("an OS file lost OSFile")
	}
	if _, ok := f.(Preallocator); !ok {
		t.Fatal("an OS file lost Preallocator")
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if s := fs.Syncs(); len(s) != 1 || s[0] < 5*time.Millisecond {
		t.Fatalf("syncs %v, want one of at least 5 ms", s)
	}
	m := &SlowSyncFS{FS: NewMem()}
	g, err := m.Create("/g")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil || len(m.Syncs()) != 1 {
		t.Fatalf("sync without a delay: %v, %d recorded", err, len(m.Syncs()))
	}
}
