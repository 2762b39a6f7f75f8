package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// impls are the FS implementations whose behaviour must agree. Each returns
// the FS and a directory to work in.
var impls = []struct {
	name string
	new  func(t *testing.T) (vfs.FS, string)
}{
	{"os", func(t *testing.T) (vfs.FS, string) { return vfs.Default, t.TempDir() }},
	{"mem", func(t *testing.T) (vfs.FS, string) {
		m := vfs.NewMem()
		must(t, m.MkdirAll("/data"))
		return m, "/data"
	}},
	{"errfs-over-mem", func(t *testing.T) (vfs.FS, string) {
		m := vfs.NewMem()
		must(t, m.MkdirAll("/data"))
		return vfs.NewErrorFS(m), "/data"
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, fsys vfs.FS, name string, contents string) vfs.File {
	t.Helper()
	f, err := fsys.Create(name)
	must(t, err)
	if contents != "" {
		n, err := f.Write([]byte(contents))
		must(t, err)
		if n != len(contents) {
			t.Fatalf("short write %d of %d", n, len(contents))
		}
	}
	return f
}

// readAll reads a whole file through a fresh read-only handle.
func readAll(t *testing.T, fsys vfs.FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	must(t, err)
	defer f.Close()
	size, err := f.Size()
	must(t, err)
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		t.Fatal(err)
	}
	return string(buf)
}

func wantErrIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want errors.Is %v", err, target)
	}
}

// semantics is run against every implementation; all must agree.
var semantics = []struct {
	name string
	run  func(t *testing.T, fsys vfs.FS, dir string)
}{
	{"write-readat-size", func(t *testing.T, fsys vfs.FS, dir string) {
		f := create(t, fsys, filepath.Join(dir, "a"), "hello ")
		defer f.Close()
		_, err := f.Write([]byte("world"))
		must(t, err)
		if size, err := f.Size(); err != nil || size != 11 {
			t.Fatalf("Size = %d, %v; want 11", size, err)
		}
		buf := make([]byte, 5)
		n, err := f.ReadAt(buf, 6)
		if n != 5 || err != nil || string(buf) != "world" {
			t.Fatalf("ReadAt = %d %q %v", n, buf, err)
		}
		n, err = f.ReadAt(buf, 8) // crosses the end
		if n != 3 || !errors.Is(err, io.EOF) || string(buf[:n]) != "rld" {
			t.Fatalf("ReadAt past end = %d %q %v", n, buf[:n], err)
		}
		n, err = f.ReadAt(buf, 100)
		if n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("ReadAt beyond end = %d %v", n, err)
		}
		if f.Name() != filepath.Join(dir, "a") {
			t.Fatalf("Name = %q", f.Name())
		}
		st, err := fsys.Stat(filepath.Join(dir, "a"))
		must(t, err)
		if st.Size() != 11 || st.IsDir() || st.Name() != "a" {
			t.Fatalf("Stat = %v %v %q", st.Size(), st.IsDir(), st.Name())
		}
	}},
	{"truncate", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "t")
		f := create(t, fsys, name, "0123456789")
		defer f.Close()
		must(t, f.Sync())
		must(t, f.Truncate(4))
		_, err := f.Write([]byte("ab")) // appends at the new end
		must(t, err)
		if got := readAll(t, fsys, name); got != "0123ab" {
			t.Fatalf("after shrink and append: %q", got)
		}
		must(t, f.Truncate(8))
		if got := readAll(t, fsys, name); got != "0123ab\x00\x00" {
			t.Fatalf("after extend: %q", got)
		}
	}},
	{"create-truncates", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "c")
		must(t, create(t, fsys, name, "old contents").Close())
		f := create(t, fsys, name, "new")
		must(t, f.Close())
		if got := readAll(t, fsys, name); got != "new" {
			t.Fatalf("got %q", got)
		}
	}},
	{"open-append-and-read-only", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "o")
		must(t, create(t, fsys, name, "abc").Close())
		f, err := fsys.OpenAppend(name)
		must(t, err)
		_, err = f.Write([]byte("def"))
		must(t, err)
		must(t, f.Close())
		if got := readAll(t, fsys, name); got != "abcdef" {
			t.Fatalf("got %q", got)
		}
		r, err := fsys.Open(name)
		must(t, err)
		defer r.Close()
		if _, err := r.Write([]byte("x")); err == nil {
			t.Fatal("Write on a read-only file succeeded")
		}
	}},
	{"not-exist", func(t *testing.T, fsys vfs.FS, dir string) {
		missing := filepath.Join(dir, "missing")
		_, err := fsys.Open(missing)
		wantErrIs(t, err, fs.ErrNotExist)
		_, err = fsys.OpenAppend(missing)
		wantErrIs(t, err, fs.ErrNotExist)
		_, err = fsys.Stat(missing)
		wantErrIs(t, err, fs.ErrNotExist)
		wantErrIs(t, fsys.Remove(missing), fs.ErrNotExist)
		wantErrIs(t, fsys.Rename(missing, filepath.Join(dir, "x")), fs.ErrNotExist)
		_, err = fsys.List(missing)
		wantErrIs(t, err, fs.ErrNotExist)
		_, err = fsys.Create(filepath.Join(missing, "child"))
		wantErrIs(t, err, fs.ErrNotExist)
		wantErrIs(t, fsys.SyncDir(missing), fs.ErrNotExist)
	}},
	{"rename-replaces", func(t *testing.T, fsys vfs.FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		fa := create(t, fsys, a, "from a")
		defer fa.Close()
		must(t, create(t, fsys, b, "old b").Close())
		must(t, fsys.Rename(a, b))
		_, err := fsys.Stat(a)
		wantErrIs(t, err, fs.ErrNotExist)
		if got := readAll(t, fsys, b); got != "from a" {
			t.Fatalf("b = %q", got)
		}
		// The open handle follows the file to its new name.
		_, err = fa.Write([]byte("!"))
		must(t, err)
		if got := readAll(t, fsys, b); got != "from a!" {
			t.Fatalf("b = %q", got)
		}
		must(t, fsys.Rename(b, b)) // to itself: a no-op
		must(t, fsys.MkdirAll(filepath.Join(dir, "sub")))
		must(t, fsys.Rename(b, filepath.Join(dir, "sub", "c")))
		if got := readAll(t, fsys, filepath.Join(dir, "sub", "c")); got != "from a!" {
			t.Fatalf("sub/c = %q", got)
		}
	}},
	{"remove-open-file", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "r")
		f := create(t, fsys, name, "still here")
		defer f.Close()
		must(t, fsys.Remove(name))
		_, err := fsys.Stat(name)
		wantErrIs(t, err, fs.ErrNotExist)
		buf := make([]byte, 10)
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "still here" {
			t.Fatalf("ReadAt after remove = %q, %v", buf, err)
		}
	}},
	{"mkdir-list-remove-dir", func(t *testing.T, fsys vfs.FS, dir string) {
		must(t, fsys.MkdirAll(filepath.Join(dir, "p", "q")))
		must(t, fsys.MkdirAll(filepath.Join(dir, "p", "q"))) // idempotent
		for _, n := range []string{"z", "b", "a"} {
			must(t, create(t, fsys, filepath.Join(dir, "p", n), n).Close())
		}
		names, err := fsys.List(filepath.Join(dir, "p"))
		must(t, err)
		if want := []string{"a", "b", "q", "z"}; !slices.Equal(names, want) {
			t.Fatalf("List = %v, want %v", names, want)
		}
		st, err := fsys.Stat(filepath.Join(dir, "p", "q"))
		must(t, err)
		if !st.IsDir() {
			t.Fatal("Stat of a directory: not IsDir")
		}
		if err := fsys.Remove(filepath.Join(dir, "p")); err == nil {
			t.Fatal("Remove of a non-empty directory succeeded")
		}
		must(t, fsys.Remove(filepath.Join(dir, "p", "q")))
		wantErrIs(t, fsys.MkdirAll(filepath.Join(dir, "p", "a", "x")), syscall.ENOTDIR)
		must(t, fsys.SyncDir(filepath.Join(dir, "p")))
	}},
	{"use-after-close", func(t *testing.T, fsys vfs.FS, dir string) {
		f := create(t, fsys, filepath.Join(dir, "closed"), "x")
		must(t, f.Close())
		_, err := f.Write([]byte("y"))
		wantErrIs(t, err, os.ErrClosed)
		_, err = f.ReadAt(make([]byte, 1), 0)
		wantErrIs(t, err, os.ErrClosed)
		_, err = f.Size()
		wantErrIs(t, err, os.ErrClosed)
		if err := f.Close(); err == nil {
			t.Fatal("second Close succeeded")
		}
	}},
	{"large-appends", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "big")
		f := create(t, fsys, name, "")
		defer f.Close()
		var want bytes.Buffer
		for i := range 200 {
			p := bytes.Repeat([]byte{byte(i)}, 1000+i)
			_, err := f.Write(p)
			must(t, err)
			want.Write(p)
			if i%50 == 0 {
				must(t, f.Sync())
			}
		}
		if got := readAll(t, fsys, name); got != want.String() {
			t.Fatalf("contents differ: %d bytes, want %d", len(got), want.Len())
		}
	}},
}

func TestSemantics(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range semantics {
				t.Run(tc.name, func(t *testing.T) {
					fsys, dir := impl.new(t)
					tc.run(t, fsys, dir)
				})
			}
		})
	}
}

func TestOSFile(t *testing.T) {
	f, err := vfs.Default.Create(filepath.Join(t.TempDir(), "f"))
	must(t, err)
	defer f.Close()
	if _, ok := f.(vfs.OSFile); !ok {
		t.Fatal("OS file does not implement OSFile")
	}
	m := vfs.NewMem()
	mf, err := m.Create("f")
	must(t, err)
	if _, ok := mf.(vfs.OSFile); ok {
		t.Fatal("MemFS file implements OSFile")
	}
	ef, err := vfs.NewErrorFS(vfs.Default).Create(filepath.Join(t.TempDir(), "g"))
	must(t, err)
	defer ef.Close()
	if _, ok := ef.(vfs.OSFile); ok {
		t.Fatal("ErrorFS file implements OSFile")
	}
}

// TestWriteFileAtomicConcurrent: writers of one path at once (a partition's maintenance
// and its cleaner) each succeed, and the file ends as one of them wrote it, whole. They
// share the temporary name: unserialized, one renamed it from under another (ENOENT) or
// their bytes mixed in it.
func TestWriteFileAtomicConcurrent(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				data := bytes.Repeat([]byte{byte('a' + w)}, 4096+i)
				if err := vfs.WriteFileAtomic(vfs.Default, dir, "f", data); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := vfs.ReadFile(vfs.Default, filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 4096 || !bytes.Equal(got, bytes.Repeat(got[:1], len(got))) {
		t.Fatalf("the file holds %d bytes of more than one writer", len(got))
	}
}
