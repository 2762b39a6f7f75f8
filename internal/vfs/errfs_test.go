package vfs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// errBases are the file systems ErrorFS is tested over.
var errBases = []struct {
	name string
	new  func(t *testing.T) (vfs.FS, string)
}{
	{"mem", func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/" }},
	{"os", func(t *testing.T) (vfs.FS, string) { return vfs.Default, t.TempDir() }},
}

func TestErrorFS(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, e *vfs.ErrorFS, dir string)
	}{
		{"ENOSPC until space is freed", func(t *testing.T, e *vfs.ErrorFS, dir string) {
			e.SetSpace(10)
			name := filepath.Join(dir, "f")
			f := create(t, e, name, "12345678")
			defer f.Close()
			n, err := f.Write([]byte("abcdefgh"))
			if n != 2 || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Write = %d, %v; want 2, ENOSPC", n, err)
			}
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Path != name {
				t.Fatalf("error %v is not a *os.PathError for %s", err, name)
			}
			n, err = f.Write([]byte("x"))
			if n != 0 || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Write when full = %d, %v", n, err)
			}
			wantErrIs(t, f.Truncate(20), syscall.ENOSPC)
			if e.Space() != 0 {
				t.Fatalf("Space = %d", e.Space())
			}
			// Removing another file gives its space back.
			other := filepath.Join(dir, "other")
			e.SetSpace(5)
			must(t, create(t, e, other, "12345").Close())
			_, err = f.Write([]byte("x"))
			wantErrIs(t, err, syscall.ENOSPC)
			must(t, e.Remove(other))
			if _, err := f.Write([]byte("abcde")); err != nil {
				t.Fatalf("Write after Remove freed space: %v", err)
			}
			// Shrinking gives space back; so does raising the limit.
			must(t, f.Truncate(5))
			if e.Space() != 10 {
				t.Fatalf("Space after truncate = %d, want 10", e.Space())
			}
			e.SetSpace(vfs.Unlimited)
			_, err = f.Write(make([]byte, 1000))
			must(t, err)
			if got := readAll(t, e, name); len(got) != 1005 || got[:5] != "12345" {
				t.Fatalf("contents %q", got[:min(len(got), 20)])
			}
		}},
		{"EIO on Sync once", func(t *testing.T, e *vfs.ErrorFS, dir string) {
			f := create(t, e, filepath.Join(dir, "f"), "x")
			defer f.Close()
			e.Inject(vfs.Fault{Op: vfs.OpSync, Err: syscall.EIO, Count: 1})
			wantErrIs(t, f.Sync(), syscall.EIO)
			must(t, f.Sync())
			if e.Fired(vfs.OpSync) != 1 {
				t.Fatalf("Fired = %d", e.Fired(vfs.OpSync))
			}
		}},
		{"EIO on Sync always until cleared", func(t *testing.T, e *vfs.ErrorFS, dir string) {
			f := create(t, e, filepath.Join(dir, "f"), "x")
			defer f.Close()
			e.Inject(vfs.Fault{Op: vfs.OpSync}) // default error is EIO
			for range 3 {
				wantErrIs(t, f.Sync(), syscall.EIO)
			}
			e.ClearFaults()
			must(t, f.Sync())
			if e.Fired(vfs.OpAny) != 3 {
				t.Fatalf("Fired = %d", e.Fired(vfs.OpAny))
			}
		}},
		{"short write", func(t *testing.T, e *vfs.ErrorFS, dir string) {
			name := filepath.Join(dir, "f")
			f := create(t, e, name, "")
			defer f.Close()
			e.Inject(vfs.Fault{Op: vfs.OpWrite, ShortWrite: 3, Count: 1})
			n, err := f.Write([]byte("abcdef"))
			if n != 3 || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Write = %d, %v", n, err)
			}
			// ShortWrite is capped so the write is always short.
			e.Inject(vfs.Fault{Op: vfs.OpWrite, ShortWrite: 100, Count: 1, Err: syscall.ENOSPC})
			n, err = f.Write([]byte("gh"))
			if n != 1 || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if _, err := f.Write([]byte("!")); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, e, name); got != "abcg!" {
				t.Fatalf("contents %q", got)
			}
		}},
		{"metadata failures", func(t *testing.T, e *vfs.ErrorFS, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			must(t, create(t, e, a, "a").Close())
			e.Inject(vfs.Fault{Op: vfs.OpCreate, Count: 1})
			e.Inject(vfs.Fault{Op: vfs.OpRename, Count: 1, Err: syscall.EXDEV})
			e.Inject(vfs.Fault{Op: vfs.OpRemove, Count: 1, Err: syscall.EACCES})
			e.Inject(vfs.Fault{Op: vfs.OpSyncDir, Count: 1})
			e.Inject(vfs.Fault{Op: vfs.OpOpen, Count: 1})
			_, err := e.Create(b)
			wantErrIs(t, err, syscall.EIO)
			wantErrIs(t, e.Rename(a, b), syscall.EXDEV)
			wantErrIs(t, e.Remove(a), syscall.EACCES)
			wantErrIs(t, e.SyncDir(dir), syscall.EIO)
			_, err = e.Open(a)
			wantErrIs(t, err, syscall.EIO)
			// All retired: everything works again, and nothing changed.
			if got := readAll(t, e, a); got != "a" {
				t.Fatalf("contents %q", got)
			}
			must(t, e.Rename(a, b))
			must(t, e.SyncDir(dir))
			must(t, e.Remove(b))
			if e.Fired(vfs.OpAny) != 5 {
				t.Fatalf("Fired = %d", e.Fired(vfs.OpAny))
			}
		}},
		{"path and predicate filters", func(t *testing.T, e *vfs.ErrorFS, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			fa, fb := create(t, e, a, "a"), create(t, e, b, "b")
			defer fa.Close()
			defer fb.Close()
			e.Inject(vfs.Fault{Op: vfs.OpSync, Path: a})
			must(t, fb.Sync())
			wantErrIs(t, fa.Sync(), syscall.EIO)
			e.ClearFaults()
			e.Inject(vfs.Fault{Op: vfs.OpAny, Match: func(op vfs.Op, path string) bool {
				return op == vfs.OpReadAt && path == b
			}})
			_, err := fa.ReadAt(make([]byte, 1), 0)
			must(t, err)
			_, err = fb.ReadAt(make([]byte, 1), 0)
			wantErrIs(t, err, syscall.EIO)
			// Rename matches either name.
			e.ClearFaults()
			e.Inject(vfs.Fault{Op: vfs.OpRename, Path: b, Count: 1})
			wantErrIs(t, e.Rename(a, b), syscall.EIO)
		}},
	}
	for _, base := range errBases {
		t.Run(base.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					fsys, dir := base.new(t)
					tc.run(t, vfs.NewErrorFS(fsys), dir)
				})
			}
		})
	}
}

// TestErrorFSConcurrent is for -race: faults injected and cleared while
// other goroutines write.
func TestErrorFSConcurrent(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	e.SetSpace(1 << 20)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			f, err := e.Create(fmt.Sprintf("/f%d", g))
			if err != nil {
				t.Error(err)
				return
			}
			for range 200 {
				_, _ = f.Write([]byte("0123456789"))
				_ = f.Sync()
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			e.Inject(vfs.Fault{Op: vfs.OpSync, Count: 1})
			_ = e.Fired(vfs.OpSync)
		}
		e.ClearFaults()
	})
	wg.Wait()
	var total int64
	for g := range 4 {
		st, err := e.Stat(fmt.Sprintf("/f%d", g))
		must(t, err)
		total += st.Size()
	}
	if total+e.Space() != 1<<20 {
		t.Fatalf("space accounting: %d written + %d free != %d", total, e.Space(), 1<<20)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[vfs.Op]string{vfs.OpSync: "sync", vfs.OpWrite: "write", vfs.Op(200): "op?"} {
		if op.String() != want {
			t.Errorf("%d.String() = %q, want %q", op, op.String(), want)
		}
	}
}
