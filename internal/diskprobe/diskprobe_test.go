package diskprobe_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/diskprobe"
	"github.com/sluice-mq/sluice/internal/vfs"
)

const probeTime = 200 * time.Millisecond

// leftovers fails the test if a probe left a file behind.
func leftovers(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("probe left %d files in %s", len(entries), dir)
	}
}

func TestFdatasyncRate(t *testing.T) {
	dir := t.TempDir()
	ops, p50, p99, err := diskprobe.FdatasyncRate(dir, probeTime)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fdatasync: %.0f ops/s, p50 %v, p99 %v", ops, p50, p99)
	if ops <= 0 || p50 <= 0 || p99 < p50 {
		t.Fatalf("insane result: %v ops/s, p50 %v, p99 %v", ops, p50, p99)
	}
	leftovers(t, dir)
}

func TestSyncedWriteBandwidth(t *testing.T) {
	for _, block := range []int{4 << 10, 1 << 20} {
		dir := t.TempDir()
		bps, err := diskprobe.SyncedWriteBandwidth(dir, block, probeTime)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("synced writes, %d B blocks: %.1f MB/s", block, bps/1e6)
		if bps <= 0 {
			t.Fatalf("block %d: %v bytes/s", block, bps)
		}
		leftovers(t, dir)
	}
}

func TestZeroDurationStillMeasures(t *testing.T) {
	dir := t.TempDir()
	ops, _, _, err := diskprobe.FdatasyncRate(dir, 0)
	if err != nil || ops <= 0 {
		t.Fatalf("FdatasyncRate(0) = %v, %v", ops, err)
	}
	bps, err := diskprobe.SyncedWriteBandwidth(dir, 1<<10, 0)
	if err != nil || bps <= 0 {
		t.Fatalf("SyncedWriteBandwidth(0) = %v, %v", bps, err)
	}
	leftovers(t, dir)
}

func TestErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	if _, _, _, err := diskprobe.FdatasyncRate(missing, probeTime); err == nil {
		t.Error("FdatasyncRate on a missing directory succeeded")
	}
	if _, err := diskprobe.SyncedWriteBandwidth(missing, 1<<20, probeTime); err == nil {
		t.Error("SyncedWriteBandwidth on a missing directory succeeded")
	}
	for _, block := range []int{0, -1, diskprobe.MaxFileBytes + 1} {
		if _, err := diskprobe.SyncedWriteBandwidth(t.TempDir(), block, probeTime); err == nil {
			t.Errorf("block size %d accepted", block)
		}
	}
}

func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	l, err := diskprobe.Measure(dir, probeTime/2)
	if err != nil {
		t.Fatal(err)
	}
	s := l.String()
	t.Log(s)
	if l.FdatasyncPerSec <= 0 || l.SyncedBytesPerS <= 0 || !strings.Contains(s, "fdatasync") {
		t.Fatalf("Measure = %+v", l)
	}
	leftovers(t, dir)
}

// BenchmarkFdatasync measures one 4 KiB append plus fdatasync on the disk
// under the test's temporary directory (set TMPDIR to probe another disk).
func BenchmarkFdatasync(b *testing.B) {
	f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, diskprobe.SyncBlock)
	for i := range block {
		block[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(block)))
	var size int64
	for b.Loop() {
		if size+int64(len(block)) > diskprobe.MaxFileBytes {
			b.StopTimer()
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
			size = 0
			b.StartTimer()
		}
		if _, err := f.Write(block); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		size += int64(len(block))
	}
}
