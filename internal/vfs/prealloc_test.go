package vfs_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestPreallocateZerosAhead: once less than a chunk of zeros is left, the
// next chunk is written in the background, without another Write (the
// writer, a log's syncer, no longer pays for it).
func TestPreallocateZerosAhead(t *testing.T) {
	const chunk = 64 << 10
	name := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	must(t, f.(vfs.Preallocator).Preallocate(chunk))
	must(t, write(f, string(bytes.Repeat([]byte("a"), 60<<10)))) // fills to 60 KiB + chunk
	must(t, write(f, string(bytes.Repeat([]byte("b"), 8<<10))))  // leaves less than a chunk
	want := int64(60<<10 + 2*chunk)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("file on disk stays %d bytes: no chunk was zeroed ahead (want %d)", st.Size(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n, _ := f.Size(); n != 68<<10 {
		t.Fatalf("Size = %d, want %d", n, 68<<10)
	}
}

// TestPreallocateAheadWritesTruncates: many writes across chunks while
// background fills run, truncations among them: the contents are exactly
// what was written, the file on disk never holds data past what a fill
// zeroed over, and Close leaves exactly the contents.
func TestPreallocateAheadWritesTruncates(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	must(t, f.(vfs.Preallocator).Preallocate(8<<10))
	var want []byte
	for i := range 400 {
		piece := bytes.Repeat([]byte{byte('a' + i%26)}, 100+i*7%3000)
		must(t, write(f, string(piece)))
		want = append(want, piece...)
		if i%37 == 36 { // cut the last piece, as a failed group write is cut back
			size := int64(len(want) - len(piece))
			must(t, f.Truncate(size))
			want = want[:size]
		}
		if i%50 == 0 {
			must(t, f.Sync())
		}
	}
	got := make([]byte, len(want)+10)
	n, _ := f.ReadAt(got, 0)
	if !bytes.Equal(got[:n], want) {
		t.Fatalf("contents differ: %d bytes read, %d written", n, len(want))
	}
	must(t, f.Close())
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("closed file is %d bytes, want its %d bytes of contents exactly", len(data), len(want))
	}
}

// TestPreallocateTwice: a second Preallocate on a file already zeroing
// ahead keeps its state (the logical end, a running fill) and changes the
// chunk only; the contents stay exact.
func TestPreallocateTwice(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	p := f.(vfs.Preallocator)
	must(t, p.Preallocate(4096))
	var want []byte
	for i := range 50 {
		piece := bytes.Repeat([]byte{byte('a' + i%26)}, 1000)
		must(t, write(f, string(piece)))
		want = append(want, piece...)
		if i%10 == 0 {
			must(t, p.Preallocate(int64(4096*(1+i%3))))
		}
	}
	if n, _ := f.Size(); n != int64(len(want)) {
		t.Fatalf("Size = %d, want %d", n, len(want))
	}
	must(t, f.Close())
	data, _ := os.ReadFile(name)
	if !bytes.Equal(data, want) {
		t.Fatalf("closed file is %d bytes, want exactly its %d of contents", len(data), len(want))
	}
}
