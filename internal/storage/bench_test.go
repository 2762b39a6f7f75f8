package storage

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkAppend measures appends of 1 KiB records, SyncAlways, on the real
// disk under the test's temp dir: batches of 1, 16 and 256 records, from 1,
// 8 and 64 concurrent appenders. One op is one Append call of one batch.
// Compare appends/s with BenchmarkFdatasync's syncs/s: group commit is what
// lets many appenders share each fdatasync.
func BenchmarkAppend(b *testing.B) {
	for _, records := range []int{1, 16, 256} {
		for _, appenders := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("batch=%d/appenders=%d", records, appenders), func(b *testing.B) {
				benchAppend(b, records, appenders)
			})
		}
	}
}

func benchAppend(b *testing.B, records, appenders int) {
	o := Options{FS: vfs.Default, Dir: b.TempDir(), Logger: quiet}
	l, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := mkBatch(b, records, 1024, 1)
	b.SetBytes(int64(len(payload)))
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	b.ResetTimer()
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if _, err := l.Append(context.Background(), payload); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "appends/s")
	b.ReportMetric(float64(b.N*records)/sec, "records/s")
}

// BenchmarkFdatasync is the disk's own rate: append 1 KiB, fdatasync, repeat.
func BenchmarkFdatasync(b *testing.B) {
	f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1024)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
}

// BenchmarkRead reads 64 KiB fetches at random offsets of a 64 MiB log of
// 16-record batches of 1 KiB records (page cache warm): the Kafka fetch path
// with its checks (index lookup, header walk, CRC of every batch returned).
func BenchmarkRead(b *testing.B) {
	o := Options{FS: vfs.Default, Dir: b.TempDir(), Logger: quiet, Sync: SyncPolicy{Mode: SyncNever}}
	l, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := mkBatch(b, 16, 1024, 1)
	for range (64 << 20) / len(payload) {
		if _, err := l.Append(context.Background(), payload); err != nil {
			b.Fatal(err)
		}
	}
	hw := l.HighWatermark()
	b.SetBytes(64 << 10)
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		if _, err := l.Read(rng.Int64N(hw), 64<<10); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadSection locates 64 KiB sections at random offsets of a 64 MiB
// log (page cache warm) and copies each to io.Discard through
// Section.WriteTo: the Kafka sendfile path without a socket, with whatever
// it checks (index lookup, header walk, CRC of batches not yet verified).
func BenchmarkReadSection(b *testing.B) {
	o := Options{FS: vfs.Default, Dir: b.TempDir(), Logger: quiet, Sync: SyncPolicy{Mode: SyncNever}}
	l, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := mkBatch(b, 16, 1024, 1)
	for range (64 << 20) / len(payload) {
		if _, err := l.Append(context.Background(), payload); err != nil {
			b.Fatal(err)
		}
	}
	hw := l.HighWatermark()
	b.SetBytes(64 << 10)
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		sec, err := l.ReadSection(rng.Int64N(hw), 64<<10)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sec.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendPreallocated is BenchmarkAppend with the broker's
// preallocation (1 MiB ahead of the active segment's appends), reporting
// the Append latency quantiles too: the chunk of zeros written every 1 MiB
// of data is where a group commit's tail came from (docs/storage.md,
// "Preallocation").
func BenchmarkAppendPreallocated(b *testing.B) {
	for _, records := range []int{1, 16} {
		for _, appenders := range []int{8, 64} {
			b.Run(fmt.Sprintf("batch=%d/appenders=%d", records, appenders), func(b *testing.B) {
				benchAppendPrealloc(b, records, appenders)
			})
		}
	}
}

func benchAppendPrealloc(b *testing.B, records, appenders int) {
	o := Options{FS: vfs.Default, Dir: b.TempDir(), Logger: quiet, PreallocateBytes: 1 << 20}
	l, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := mkBatch(b, records, 1024, 1)
	b.SetBytes(int64(len(payload)))
	var left atomic.Int64
	left.Store(int64(b.N))
	lat := make([][]time.Duration, appenders)
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	b.ResetTimer()
	for i := range appenders {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				began := time.Now()
				if _, err := l.Append(context.Background(), payload); err != nil {
					errs <- err
					return
				}
				lat[i] = append(lat[i], time.Since(began))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(all[len(all)*999/1000].Microseconds()), "p99.9-µs")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}
