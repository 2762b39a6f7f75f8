package storage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestPreallocatedTailAfterCrash: a preallocating log leaves zeros after its
// data until it is closed. A crash (here: the files copied while the log is
// open, as a power cut would leave them) must recover every batch, cut the
// zeros, and append after them.
func TestPreallocatedTailAfterCrash(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, vfs.Default, dir)
	o.PreallocateBytes = 1 << 20
	o.SegmentBytes = 64 << 10 // a few rolls: sealed segments must hold no zeros
	l := mustOpen(t, o)
	var want [][]byte
	for i := range 40 {
		b := mkBatch(t, 3, 500, int64(i*10))
		mustAppend(t, l, b)
		want = append(want, b)
	}
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	names, _ := os.ReadDir(crashed)
	sawZeros := false
	for i, n := range names {
		data, err := os.ReadFile(filepath.Join(crashed, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Ext(n.Name()) != logSuffix {
			continue
		}
		zeroTail := len(data) > 0 && bytes.Count(data[len(data)-64:], []byte{0}) == 64
		last := i == len(names)-1 || !hasLaterLog(names[i+1:])
		if zeroTail && !last {
			t.Errorf("sealed segment %s ends in preallocated zeros", n.Name())
		}
		sawZeros = sawZeros || (zeroTail && last)
	}
	if !sawZeros {
		t.Fatal("the active segment of an open log holds no preallocated zeros: the test tests nothing")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	o.Dir = crashed
	r := mustOpen(t, o)
	defer r.Close()
	if got := r.HighWatermark(); got != 120 {
		t.Fatalf("high watermark after recovery = %d, want 120", got)
	}
	for i := range want {
		data, err := r.Read(int64(i*3), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		// From the magic byte on: storage stamps the base offset and epoch.
		if len(data) < len(want[i]) || !bytes.Equal(data[16:len(want[i])], want[i][16:]) {
			t.Fatalf("batch %d differs after recovery", i)
		}
	}
	next := mustAppend(t, r, mkBatch(t, 2, 10, 999))
	if next[0] != 120 {
		t.Fatalf("append after recovery at %d, want 120", next[0])
	}
}

func hasLaterLog(rest []os.DirEntry) bool {
	for _, n := range rest {
		if filepath.Ext(n.Name()) == logSuffix {
			return true
		}
	}
	return false
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	names, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(from, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, n.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPreallocatedAheadCrash: appenders under SyncAlways cross many chunks
// of zeros written ahead in the background while the files are copied as
// they stand (a crash at that instant): every batch acknowledged before a
// copy began is in the copy after recovery, which cuts whatever zeros,
// partial fills or torn groups follow it.
func TestPreallocatedAheadCrash(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, vfs.Default, dir)
	o.PreallocateBytes = 16 << 10 // a fill every few groups
	l := mustOpen(t, o)
	defer l.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := l.Append(context.Background(), mkBatch(t, 2, 300+w*50, int64(i))); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	for round := range 5 {
		time.Sleep(30 * time.Millisecond)
		acked := l.HighWatermark()
		crashed := t.TempDir()
		copyDir(t, dir, crashed)
		c := o
		c.Dir = crashed
		r := mustOpen(t, c)
		if got := r.HighWatermark(); got < acked {
			t.Errorf("round %d: recovered high watermark %d, below the %d acknowledged before the crash", round, got, acked)
		}
		for off := int64(0); off < acked; {
			data, err := r.Read(off, 1<<20)
			if err != nil || len(data) == 0 {
				t.Fatalf("round %d: read at %d of %d acknowledged: %d bytes, %v", round, off, acked, len(data), err)
			}
			off = lastOffsetAfter(t, data)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

// lastOffsetAfter is the offset after the last whole batch in data.
func lastOffsetAfter(t *testing.T, data []byte) int64 {
	t.Helper()
	var next int64
	for len(data) >= batch.HeaderSize {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Size() > int64(len(data)) {
			break
		}
		next = h.LastOffset() + 1
		data = data[h.Size():]
	}
	if next == 0 {
		t.Fatal("no whole batch in a read")
	}
	return next
}
