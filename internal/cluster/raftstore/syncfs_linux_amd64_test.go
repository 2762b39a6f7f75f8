package raftstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// sysSyncfs is syncfs(2) on linux/amd64 (the syscall package has no name
// for it).
const sysSyncfs = 306

// BenchmarkFlushFloor is the raw I/O of the ways to make one 1 KiB append
// to each of n files durable, without storage on top: an fdatasync per
// file one after another, all of them concurrently (what Store.Sync does),
// or one syncfs(2) for the whole file system (one journal commit and one
// device flush for every file, but also everything else dirty on that file
// system, which a shared disk makes unpredictable). It says how much of
// BenchmarkSyncGroups' cost is the per-file flush itself:
//
//	go test -run '^$' -bench FlushFloor -benchtime 2s ./internal/cluster/raftstore
func BenchmarkFlushFloor(b *testing.B) {
	for _, n := range []int{10, 100} {
		for _, mode := range []string{"fdatasync-serial", "fdatasync-concurrent", "syncfs"} {
			b.Run(fmt.Sprintf("files=%d/%s", n, mode), func(b *testing.B) { benchFlush(b, n, mode) })
		}
	}
}

func benchFlush(b *testing.B, n int, mode string) {
	dir := b.TempDir()
	files := make([]*os.File, n)
	for k := range files {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(k)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		files[k] = f
	}
	buf := make([]byte, benchEntryBytes)
	b.ResetTimer()
	for range b.N {
		for _, f := range files {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		switch mode {
		case "fdatasync-serial":
			for _, f := range files {
				if err := syscall.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		case "fdatasync-concurrent":
			var wg sync.WaitGroup
			for _, f := range files {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := syscall.Fdatasync(int(f.Fd())); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		case "syncfs":
			if _, _, e := syscall.Syscall(sysSyncfs, files[0].Fd(), 0, 0); e != 0 {
				b.Fatal(e)
			}
		}
	}
	el := b.Elapsed()
	b.ReportMetric(float64(b.N*n)/el.Seconds(), "entries/s")
	b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/round")
	b.ReportMetric(0, "ns/op")
}
