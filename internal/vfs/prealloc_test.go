package vfs_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestPreallocate: a preallocating file shows only what was written (Size,
// ReadAt), holds zeros beyond it on disk, appends at its logical end after a
// Truncate, and is cut to its contents by Close.
func TestPreallocate(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	must(t, write(f, "head-"))
	p, ok := f.(vfs.Preallocator)
	if !ok {
		t.Fatal("OS files do not implement Preallocator")
	}
	must(t, p.Preallocate(4096))
	must(t, write(f, "one-"))
	must(t, write(f, "two"))
	onDisk := func() int64 {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	if got := onDisk(); got < 4096 {
		t.Fatalf("file on disk is %d bytes: nothing was preallocated", got)
	}
	if n, _ := f.Size(); n != 12 {
		t.Fatalf("Size = %d, want 12", n)
	}
	buf := make([]byte, 100)
	n, err := f.ReadAt(buf, 0)
	if n != 12 || err != io.EOF || string(buf[:n]) != "head-one-two" {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf[:n])
	}
	if _, err := f.ReadAt(buf[:1], 12); err != io.EOF {
		t.Fatalf("ReadAt at the logical end: %v, want EOF", err)
	}

	must(t, f.Truncate(9)) // cut "two"
	must(t, write(f, "2"))
	must(t, f.Sync())
	n, _ = f.ReadAt(buf, 0)
	if string(buf[:n]) != "head-one-2" {
		t.Fatalf("after Truncate and Write: %q", buf[:n])
	}
	must(t, write(f, string(bytes.Repeat([]byte("x"), 10000)))) // past the first chunk
	if n, _ := f.Size(); n != 10010 {
		t.Fatalf("Size = %d, want 10010", n)
	}
	must(t, f.Close())
	if got := onDisk(); got != 10010 {
		t.Fatalf("closed file is %d bytes on disk, want its 10010 bytes of contents", got)
	}
	data, _ := os.ReadFile(name)
	if !bytes.HasPrefix(data, []byte("head-one-2xxx")) {
		t.Fatalf("contents %q...", data[:13])
	}
}

func write(f vfs.File, s string) error {
	_, err := f.Write([]byte(s))
	return err
}
