package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

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
