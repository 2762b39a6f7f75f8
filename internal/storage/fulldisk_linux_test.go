package storage

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
)

// TestFullRealDiskWithPreallocation fills a real (tmpfs) file system under a
// preallocating log: the append that no longer fits fails with ENOSPC, the
// next one fails too, everything acknowledged before stays readable, and the
// log reopens with exactly that. ErrorFS covers full disks in the other
// tests, but it does not preallocate; this one runs the OS path, whose zero
// fill fails first. It needs to mount a tmpfs (root); it skips where it may
// not.
func TestFullRealDiskWithPreallocation(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=3m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, 0) })

	o := Options{Dir: filepath.Join(mnt, "log"), PreallocateBytes: 1 << 20, Logger: quiet}
	l := mustOpen(t, o)
	b, err := batch.Build([]batch.Record{{Value: make([]byte, 8000)}}, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	acked := int64(0)
	var full error
	for range 1000 { // 8 MB: more than the 3 MiB file system
		if _, err := l.Append(context.Background(), b); err != nil {
			full = err
			break
		}
		acked++
	}
	if !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("after %d appends: %v, want ENOSPC", acked, full)
	}
	if acked < 100 {
		t.Fatalf("only %d appends fit in 3 MiB: preallocation took the space the data needed", acked)
	}
	if _, err := l.Append(context.Background(), b); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("second append on the full disk: %v, want ENOSPC", err)
	}
	if hw := l.HighWatermark(); hw != acked {
		t.Fatalf("high watermark %d, acknowledged %d", hw, acked)
	}
	for off := range acked {
		if _, err := l.Read(off, 1<<20); err != nil {
			t.Fatalf("read %d of %d acknowledged: %v", off, acked, err)
		}
	}
	l.Close()
	r := mustOpen(t, o)
	defer r.Close()
	if hw := r.HighWatermark(); hw != acked {
		t.Fatalf("reopened: high watermark %d, acknowledged %d", hw, acked)
	}
}
