// Package diskprobe measures the limits of the disk under a directory: how
// many append+fdatasync round trips it completes per second, and how many
// bytes per second it takes when every block written is synced. Benchmarks
// print these beside their own numbers, so a result can be read against
// what the hardware allows (group commit exists to turn the first number
// into the second).
//
// Every probe is bounded in time and in bytes, writes to one temporary file
// in the directory it is given, and removes that file before returning. It
// uses the real file system (vfs.Default); it must never be pointed at an
// in-memory FS, whose numbers would mean nothing.
package diskprobe

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

const (
	// SyncBlock is the size of each append FdatasyncRate syncs: a small
	// produce, so the cost measured is the sync's, not the transfer's.
	SyncBlock = 4 << 10
	// MaxFileBytes bounds the probe file. FdatasyncRate starts the file
	// over when it reaches this size; SyncedWriteBandwidth stops.
	MaxFileBytes = 512 << 20
)

// FdatasyncRate appends SyncBlock bytes to one file and fdatasyncs it, over
// and over for about d (at least once), and returns the round trips per
// second and the median and 99th-percentile latency of one append+sync.
func FdatasyncRate(dir string, d time.Duration) (opsPerSec float64, p50, p99 time.Duration, err error) {
	f, name, err := tempFile(dir)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { err = errors.Join(err, cleanup(f, name)) }()

	block := randomBlock(SyncBlock)
	var lat []time.Duration
	var size int64
	var busy time.Duration // time spent in timed round trips
	for start := time.Now(); len(lat) == 0 || time.Since(start) < d; {
		if size+SyncBlock > MaxFileBytes {
			// Start over, untimed: keep the disk usage bounded.
			if err := f.Truncate(0); err != nil {
				return 0, 0, 0, err
			}
			size = 0
		}
		t0 := time.Now()
		if _, err := f.Write(block); err != nil {
			return 0, 0, 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, 0, 0, err
		}
		dt := time.Since(t0)
		busy += dt
		lat = append(lat, dt)
		size += SyncBlock
	}
	slices.Sort(lat)
	p50 = lat[len(lat)*50/100]
	p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	return float64(len(lat)) / max(busy.Seconds(), 1e-9), p50, p99, nil
}

// SyncedWriteBandwidth appends blockSize bytes at a time to one file,
// fdatasyncing after each, for about d (at least one block) or until
// MaxFileBytes have been written, and returns the bytes per second.
func SyncedWriteBandwidth(dir string, blockSize int, d time.Duration) (bytesPerSec float64, err error) {
	if blockSize <= 0 || blockSize > MaxFileBytes {
		return 0, fmt.Errorf("diskprobe: block size %d out of range (1..%d)", blockSize, MaxFileBytes)
	}
	f, name, err := tempFile(dir)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, cleanup(f, name)) }()

	block := randomBlock(blockSize)
	var total int64
	start := time.Now()
	for total == 0 || (time.Since(start) < d && total+int64(blockSize) <= MaxFileBytes) {
		if _, err := f.Write(block); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		total += int64(blockSize)
	}
	return float64(total) / max(time.Since(start).Seconds(), 1e-9), nil
}

// Limits is what Measure found.
type Limits struct {
	Dir             string
	FdatasyncPerSec float64       // append(SyncBlock)+fdatasync round trips per second
	FdatasyncP50    time.Duration // median round trip
	FdatasyncP99    time.Duration // 99th-percentile round trip
	BlockSize       int           // block size of the bandwidth probe
	SyncedBytesPerS float64       // bytes per second with a sync after every block
}

// Measure runs both probes on dir, d each, the bandwidth one with 1 MiB
// blocks.
func Measure(dir string, d time.Duration) (Limits, error) {
	l := Limits{Dir: dir, BlockSize: 1 << 20}
	var err error
	l.FdatasyncPerSec, l.FdatasyncP50, l.FdatasyncP99, err = FdatasyncRate(dir, d)
	if err != nil {
		return l, err
	}
	l.SyncedBytesPerS, err = SyncedWriteBandwidth(dir, l.BlockSize, d)
	return l, err
}

// String formats the limits on one line for a benchmark's report.
func (l Limits) String() string {
	return fmt.Sprintf("disk %s: fdatasync(%d B) %.0f/s p50 %v p99 %v; synced writes (%d KiB blocks) %.1f MB/s",
		l.Dir, SyncBlock, l.FdatasyncPerSec, l.FdatasyncP50, l.FdatasyncP99,
		l.BlockSize>>10, l.SyncedBytesPerS/1e6)
}

// tempFile creates a uniquely named file in dir, open for appending.
func tempFile(dir string) (vfs.File, string, error) {
	tmp, err := os.CreateTemp(dir, "diskprobe-*.tmp")
	if err != nil {
		return nil, "", err
	}
	name := tmp.Name()
	if err := tmp.Close(); err != nil {
		return nil, "", errors.Join(err, os.Remove(name))
	}
	f, err := vfs.Default.Create(name)
	if err != nil {
		return nil, "", errors.Join(err, os.Remove(name))
	}
	return f, name, nil
}

func cleanup(f vfs.File, name string) error {
	return errors.Join(f.Close(), vfs.Default.Remove(name))
}

// randomBlock returns n incompressible bytes, so a compressing or
// deduplicating device cannot flatter the result.
func randomBlock(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}
