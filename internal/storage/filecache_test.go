package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// manyLogs opens n logs under fs (dirs /l0 …) sharing files, appends a
// batch to each (two segments each when roll is set), and returns them.
func manyLogs(t *testing.T, fs vfs.FS, files *FileCache, n int, roll bool) ([]*Log, []Options) {
	t.Helper()
	logs, opts := make([]*Log, n), make([]Options, n)
	for i := range n {
		o := testOptions(t, fs, fmt.Sprintf("/l%d", i))
		o.Files = files
		if roll {
			o.SegmentBytes = int64(len(mkBatch(t, 1, 100, 0)))
		}
		opts[i] = o
		logs[i] = mustOpen(t, o)
		mustAppend(t, logs[i], mkBatch(t, 1, 100, int64(i)))
		if roll {
			mustAppend(t, logs[i], mkBatch(t, 1, 100, int64(i)))
		}
	}
	return logs, opts
}

// TestFileCacheBoundsDescriptors opens 400 logs of two segments each (six
// files a log) through a cache of 24 descriptors and counts the files open
// at the file system while it appends, reads, closes and reopens them all:
// never more than the cache allows, and none once the logs are closed.
func TestFileCacheBoundsDescriptors(t *testing.T) {
	const maxOpen, n = 24, 400
	cfs := vfs.NewCountingFS(vfs.NewMem())
	files := NewFileCache(FileCacheOptions{MaxOpen: maxOpen, ScrubBytesPerSec: -1})
	check := func(phase string) {
		t.Helper()
		if open, peak, _ := cfs.Counts(); peak > maxOpen || open > maxOpen {
			t.Fatalf("%s: %d files open, %d at the peak; the cache allows %d", phase, open, peak, maxOpen)
		}
		if st := files.Stats(); st.Open > maxOpen || st.Peak > maxOpen {
			t.Fatalf("%s: cache stats %+v", phase, st)
		}
	}
	logs, opts := manyLogs(t, cfs, files, n, true)
	check("open and append")
	for i, l := range logs {
		if got := readAllBatches(t, l, 0); len(got) != 2 {
			t.Fatalf("log %d: %d batches", i, len(got))
		}
		if _, err := l.ReadSection(0, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	check("read")
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if open, _, _ := cfs.Counts(); open != 0 {
		t.Fatalf("%d files open after every log closed", open)
	}
	for i := range logs {
		logs[i] = mustOpen(t, opts[i])
	}
	check("reopen")
	for i, l := range logs {
		mustAppend(t, l, mkBatch(t, 1, 100, 7))
		if got := readAllBatches(t, l, 0); len(got) != 3 {
			t.Fatalf("log %d after reopen: %d batches", i, len(got))
		}
	}
	check("append and read after reopen")
	for _, l := range logs {
		l.Close()
	}
	if st := files.Stats(); st.Evictions == 0 || st.Open != 0 {
		t.Fatalf("cache stats %+v: expected evictions, and nothing open", st)
	}
}

// TestFileCacheUnderConcurrency appends to and reads 40 logs from 16
// goroutines through a cache of 8 descriptors: every byte reads back, and
// the descriptors open never pass the cache's size plus the operations in
// flight (a pinned file is never closed under its user).
func TestFileCacheUnderConcurrency(t *testing.T) {
	const maxOpen, n, workers = 8, 40, 16
	cfs := vfs.NewCountingFS(vfs.NewMem())
	files := NewFileCache(FileCacheOptions{MaxOpen: maxOpen, ScrubBytesPerSec: -1})
	logs, _ := manyLogs(t, cfs, files, n, false)
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range 60 {
				l := logs[(w*7+i)%n]
				b := mkBatch(t, 1, 50+w, int64(i))
				offs, err := l.Append(context.Background(), b)
				if err == nil {
					var got []byte
					if got, err = l.Read(offs[0], 1); err == nil && !sameBatch(got, b, offs[0]) {
						err = fmt.Errorf("log %d offset %d reads back different bytes", (w*7+i)%n, offs[0])
					}
				}
				if err == nil {
					var s Section
					if s, err = l.ReadSection(0, 1<<20); err == nil {
						_, err = s.WriteTo(io.Discard)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, peak, _ := cfs.Counts(); peak > maxOpen+workers {
		t.Fatalf("%d files open at the peak; cache %d, %d workers", peak, maxOpen, workers)
	}
}

// TestSectionOutlivesEviction: a Section handed to a front-end is read
// after ReadSection returns; the cache may have closed its file meanwhile
// (it reopens it), and once retention deletes the segment the section
// fails cleanly instead of reading another file.
func TestSectionOutlivesEviction(t *testing.T) {
	dir := t.TempDir()
	files := NewFileCache(FileCacheOptions{MaxOpen: 2, ScrubBytesPerSec: -1})
	o := testOptions(t, vfs.Default, dir)
	o.Files, o.PreallocateBytes = files, 4096
	o.SegmentBytes = int64(len(mkBatch(t, 1, 100, 0)))
	l := mustOpen(t, o)
	defer l.Close()
	want := mkBatch(t, 1, 100, 1)
	mustAppend(t, l, want)
	mustAppend(t, l, mkBatch(t, 1, 100, 2)) // rolls: segment 0 is sealed
	sec, err := l.ReadSection(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Other logs' files push segment 0's out of the cache.
	others, _ := manyLogs(t, vfs.Default, files, 3, false)
	for _, x := range others {
		defer x.Close()
	}
	var buf bytes.Buffer
	if _, err := sec.WriteTo(&buf); err != nil || !sameBatch(buf.Bytes(), want, 0) {
		t.Fatalf("section after eviction: %v", err)
	}
	if files.Stats().Evictions == 0 {
		t.Fatal("nothing was evicted")
	}
	if _, err := l.DeleteBelow(1); err != nil {
		t.Fatal(err)
	}
	if _, err := sec.WriteTo(io.Discard); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("section of a deleted segment: %v", err)
	}
}

// TestPinnedFileSurvivesDrop: a read holding a file when its segment is
// deleted finishes on the file it started on; the file is closed at its
// last release, and no new reference can be taken.
func TestPinnedFileSurvivesDrop(t *testing.T) {
	cfs := vfs.NewCountingFS(vfs.NewMem())
	files := NewFileCache(FileCacheOptions{MaxOpen: 4, ScrubBytesPerSec: -1})
	h, err := files.create(cfs, "/f")
	if err != nil {
		t.Fatal(err)
	}
	h.Write([]byte("hello"))
	f, err := h.acquire()
	if err != nil {
		t.Fatal(err)
	}
	h.drop()
	if _, err := h.acquire(); !errors.Is(err, errFileGone) {
		t.Fatalf("acquire after drop: %v", err)
	}
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "hello" {
		t.Fatalf("pinned read after drop: %q, %v", buf, err)
	}
	if open, _, _ := cfs.Counts(); open != 1 {
		t.Fatalf("%d open while pinned", open)
	}
	h.release()
	if open, _, _ := cfs.Counts(); open != 0 || files.Stats().Open != 0 {
		t.Fatalf("%d open after the last release", open)
	}
}

// TestPreallocatedActiveSegmentEvicted: the active segment of a
// preallocating log loses its descriptor to the cache between appends;
// appends go on at the right place, and a clean close leaves exactly the
// data.
func TestPreallocatedActiveSegmentEvicted(t *testing.T) {
	dir := t.TempDir()
	files := NewFileCache(FileCacheOptions{MaxOpen: 1, ScrubBytesPerSec: -1})
	o := testOptions(t, vfs.Default, filepath.Join(dir, "a"))
	o.Files, o.PreallocateBytes = files, 64<<10
	l := mustOpen(t, o)
	other := testOptions(t, vfs.Default, filepath.Join(dir, "b"))
	other.Files = files
	x := mustOpen(t, other)
	var sent [][]byte
	for i := range 20 {
		b := mkBatch(t, 1+i%3, 200, int64(i))
		sent = append(sent, b)
		mustAppend(t, l, b)
		mustAppend(t, x, mkBatch(t, 1, 10, 0)) // takes the one descriptor
	}
	path := l.active.path(logSuffix)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, b := range sent {
		total += len(b)
	}
	if st.Size() != int64(total) {
		t.Fatalf("closed segment is %d bytes, data %d", st.Size(), total)
	}
	l = mustOpen(t, o)
	defer l.Close()
	got := readAllBatches(t, l, 0)
	for i, b := range got {
		h, _ := batch.ParseHeader(b)
		if !sameBatch(b, sent[i], h.BaseOffset) {
			t.Fatalf("batch %d differs", i)
		}
	}
}

// The RLIMIT_NOFILE test's child: opens, fills, reads, closes and reopens
// many logs under a descriptor limit far below the files they hold.
const rlimitChildEnv = "SLUICE_RLIMIT_CHILD_DIR"

func TestRlimitChild(t *testing.T) {
	dir := os.Getenv(rlimitChildEnv)
	if dir == "" {
		t.Skip("run by TestManyLogsUnderRlimit as its child process")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 128, Max: 128}); err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(os.Getenv("SLUICE_RLIMIT_LOGS"))
	files := NewFileCache(FileCacheOptions{MaxOpen: 48, ScrubBytesPerSec: -1})
	opts := make([]Options, n)
	logs := make([]*Log, n)
	for i := range n {
		o := Options{Dir: filepath.Join(dir, strconv.Itoa(i)), Files: files, Logger: quiet, Sync: SyncPolicy{Mode: SyncNever},
			SegmentBytes: int64(len(mkBatch(t, 1, 64, 0)))}
		opts[i] = o
		logs[i] = mustOpen(t, o)
		mustAppend(t, logs[i], mkBatch(t, 1, 64, 1))
		mustAppend(t, logs[i], mkBatch(t, 1, 64, 2))
	}
	for round := range 2 {
		for i, l := range logs {
			if got := readAllBatches(t, l, 0); len(got) != 2+round {
				t.Fatalf("round %d log %d: %d batches", round, i, len(got))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range logs {
			logs[i] = mustOpen(t, opts[i])
			mustAppend(t, logs[i], mkBatch(t, 1, 64, 3))
		}
	}
	for _, l := range logs {
		l.Close()
	}
	fmt.Println("rlimit-child-ok", files.Stats().Peak)
}

// TestManyLogsUnderRlimit runs TestRlimitChild in a process whose
// RLIMIT_NOFILE is 128: 200 logs of two or more segments (600 and more
// files) open, take appends and reads, close and reopen twice.
func TestManyLogsUnderRlimit(t *testing.T) {
	if os.Getenv(rlimitChildEnv) != "" {
		t.Skip("child")
	}
	n := 200
	if testing.Short() {
		n = 100
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRlimitChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), rlimitChildEnv+"="+t.TempDir(), "SLUICE_RLIMIT_LOGS="+strconv.Itoa(n))
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("rlimit-child-ok")) {
		t.Fatalf("child under RLIMIT_NOFILE 128: %v\n%s", err, out)
	}
}

// TestReopenFailureIsNotASyncFailure: when the cache has closed a log's
// active segment and reopening it fails (EMFILE, EIO), the append fails
// with the error and writes nothing, and the log goes on; only a failed
// write or fdatasync of data can make it refuse appends.
func TestReopenFailureIsNotASyncFailure(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	files := NewFileCache(FileCacheOptions{MaxOpen: 1, ScrubBytesPerSec: -1})
	oa, ob := testOptions(t, efs, "/a"), testOptions(t, efs, "/b")
	oa.Files, ob.Files = files, files
	a, b := mustOpen(t, oa), mustOpen(t, ob)
	defer a.Close()
	defer b.Close()
	want := mkBatch(t, 1, 30, 1)
	mustAppend(t, a, want)
	mustAppend(t, b, mkBatch(t, 1, 30, 2)) // a's files are closed to make room
	efs.Inject(vfs.Fault{Op: vfs.OpOpen, Path: a.active.path(logSuffix), Err: syscall.EMFILE})
	if _, err := a.Append(context.Background(), mkBatch(t, 1, 30, 3)); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("append while the segment cannot be reopened: %v", err)
	}
	efs.ClearFaults()
	if err := a.Err(); err != nil {
		t.Fatalf("the log refuses appends after a failed reopen: %v", err)
	}
	mustAppend(t, a, want)
	got := readAllBatches(t, a, 0)
	if len(got) != 2 || !sameBatch(got[0], want, 0) || !sameBatch(got[1], want, 1) {
		t.Fatalf("%d batches after the failed reopen", len(got))
	}
}
