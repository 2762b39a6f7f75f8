package storage

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// faultLog opens a log on an ErrorFS over a MemFS with a few batches in it.
func faultLog(t *testing.T) (*vfs.ErrorFS, Options, *Log, [][]byte) {
	t.Helper()
	efs := vfs.NewErrorFS(vfs.NewMem())
	o := testOptions(t, efs, "/p")
	o.IndexIntervalBytes = 100
	l := mustOpen(t, o)
	var sent [][]byte
	for i := range 5 {
		b := mkBatch(t, 2, 100, int64(i))
		mustAppend(t, l, b)
		sent = append(sent, b)
	}
	return efs, o, l, sent
}

// checkContents verifies the log holds exactly sent, in order.
func checkContents(t *testing.T, l *Log, sent [][]byte) {
	t.Helper()
	got := readAllBatches(t, l, 0)
	if len(got) != len(sent) {
		t.Fatalf("%d batches, want %d", len(got), len(sent))
	}
	for i := range got {
		if !sameBatch(got[i], sent[i], int64(2*i)) {
			t.Fatalf("batch %d differs", i)
		}
	}
}

func TestDiskFull(t *testing.T) {
	efs, o, l, sent := faultLog(t)
	size := l.active.size.Load()
	efs.SetSpace(50)
	_, err := l.Append(context.Background(), mkBatch(t, 2, 100, 9))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if l.active.size.Load() != size || l.HighWatermark() != 10 {
		t.Fatal("failed append changed the log")
	}
	checkContents(t, l, sent)
	efs.SetSpace(vfs.Unlimited)
	b := mkBatch(t, 2, 100, 5)
	if offs := mustAppend(t, l, b); offs[0] != 10 {
		t.Fatalf("append after space freed at %d", offs[0])
	}
	sent = append(sent, b)
	checkContents(t, l, sent)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, o)
	defer l.Close()
	checkContents(t, l, sent)
}

func TestShortWrite(t *testing.T) {
	efs, o, l, sent := faultLog(t)
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Path: l.active.path(logSuffix), ShortWrite: 30, Count: 1})
	if _, err := l.Append(context.Background(), mkBatch(t, 2, 100, 9)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("short write: %v", err)
	}
	b := mkBatch(t, 2, 100, 5)
	mustAppend(t, l, b)
	sent = append(sent, b)
	checkContents(t, l, sent)
	l.Close()
	l = mustOpen(t, o)
	defer l.Close()
	checkContents(t, l, sent)
}

func TestUndoFailureNeedsRecovery(t *testing.T) {
	efs, o, l, sent := faultLog(t)
	path := l.active.path(logSuffix)
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Path: path, ShortWrite: 30, Count: 1})
	efs.Inject(vfs.Fault{Op: vfs.OpTruncate, Path: path, Count: 1})
	if _, err := l.Append(context.Background(), mkBatch(t, 2, 100, 9)); err == nil {
		t.Fatal("append succeeded")
	}
	if _, err := l.Append(context.Background(), mkBatch(t, 1, 1, 9)); !errors.Is(err, ErrNeedsRecovery) {
		t.Fatalf("append after failed undo: %v", err)
	}
	checkContents(t, l, sent) // reads still served
	l.Close()
	l = mustOpen(t, o) // recovery cuts the partial batch
	defer l.Close()
	checkContents(t, l, sent)
	mustAppend(t, l, mkBatch(t, 1, 1, 9))
}

func TestSyncErrorIsNeverSwallowed(t *testing.T) {
	efs, o, l, sent := faultLog(t)
	efs.Inject(vfs.Fault{Op: vfs.OpSync, Path: l.active.path(logSuffix), Count: 1})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Append(context.Background(), mkBatch(t, 1, 10, 1))
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			if !errors.Is(err, ErrNeedsRecovery) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("append error %v", err)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no append saw the fdatasync error")
	}
	// The fault fired once; a retry of fsync would now "succeed". It must not
	// be trusted: the log refuses appends until reopened.
	if _, err := l.Append(context.Background(), mkBatch(t, 1, 10, 1)); !errors.Is(err, ErrNeedsRecovery) {
		t.Fatalf("append after failed sync: %v", err)
	}
	if err := l.Err(); !errors.Is(err, ErrNeedsRecovery) {
		t.Fatalf("Err after failed sync: %v", err)
	}
	if err := l.Wait(context.Background(), 1<<40); !errors.Is(err, ErrNeedsRecovery) {
		t.Fatalf("Wait after failed sync: %v", err)
	}
	got := readAllBatches(t, l, 0)
	if len(got) < len(sent) {
		t.Fatalf("acknowledged batches unreadable after sync failure: %d", len(got))
	}
	l.Close()
	l = mustOpen(t, o)
	defer l.Close()
	if got := readAllBatches(t, l, 0); len(got) < len(sent) {
		t.Fatalf("after reopen %d batches, want at least %d", len(got), len(sent))
	}
	mustAppend(t, l, mkBatch(t, 1, 10, 1))
}

func TestReadErrorAtOpenIsNotATornTail(t *testing.T) {
	efs, o, l, sent := faultLog(t)
	path := l.active.path(logSuffix)
	l.Close()
	efs.Inject(vfs.Fault{Op: vfs.OpReadAt, Path: path})
	if _, err := Open(o); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Open with failing reads: %v", err)
	}
	efs.ClearFaults()
	l = mustOpen(t, o)
	defer l.Close()
	checkContents(t, l, sent)
}

func TestRollFailureLeavesLogUsable(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	o := testOptions(t, efs, "/p")
	o.SegmentBytes = int64(3 * len(mkBatch(t, 2, 100, 0)))
	l := mustOpen(t, o)
	defer l.Close()
	var sent [][]byte
	for i := range 3 {
		b := mkBatch(t, 2, 100, int64(i))
		sent = append(sent, b)
		mustAppend(t, l, b)
	}
	efs.Inject(vfs.Fault{Op: vfs.OpCreate, Err: syscall.ENOSPC})
	if _, err := l.Append(context.Background(), mkBatch(t, 2, 100, 9)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append needing a roll: %v", err)
	}
	efs.ClearFaults()
	b := mkBatch(t, 2, 100, 3)
	sent = append(sent, b)
	mustAppend(t, l, b)
	checkContents(t, l, sent)
	if len(l.segs) < 2 {
		t.Fatal("did not roll")
	}
}

// TestDiskFullUnderGroupCommit: when the group write of many concurrent
// appends runs out of space, every append of the group fails with ENOSPC,
// the ones that succeeded are readable at their offsets, and the log goes on.
func TestDiskFullUnderGroupCommit(t *testing.T) {
	efs, o, l, _ := faultLog(t)
	efs.SetSpace(3000) // room for a few batches, not all
	type result struct {
		b   []byte
		off int64
		err error
	}
	results := make([]result, 16)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := mkBatch(t, 1, 300, int64(i))
			offs, err := l.Append(context.Background(), b)
			results[i] = result{b: b, err: err}
			if err == nil {
				results[i].off = offs[0]
			}
		}()
	}
	wg.Wait()
	failed := 0
	for _, r := range results {
		if r.err != nil {
			if !errors.Is(r.err, syscall.ENOSPC) {
				t.Fatalf("append error %v", r.err)
			}
			failed++
			continue
		}
		got, err := l.Read(r.off, 1)
		if err != nil || !sameBatch(got, r.b, r.off) {
			t.Fatalf("acknowledged batch at %d unreadable: %v", r.off, err)
		}
	}
	if failed == 0 {
		t.Fatal("nothing ran out of space")
	}
	efs.SetSpace(vfs.Unlimited)
	hw := l.HighWatermark()
	if offs := mustAppend(t, l, mkBatch(t, 1, 1, 1)); offs[0] != hw {
		t.Fatalf("append after space freed at %d, hw was %d", offs[0], hw)
	}
	checkAllReadable(t, l)
	l.Close()
	l = mustOpen(t, o)
	defer l.Close()
	if l.HighWatermark() != hw+1 {
		t.Fatalf("after reopen hw %d, want %d", l.HighWatermark(), hw+1)
	}
}
