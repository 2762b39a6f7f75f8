//go:build unix

package storage

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/diskprobe"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkClean measures the cleaner against the disk it runs on, in the
// same run: first the disk's synced sequential write bandwidth (1 MiB
// writes, each followed by fdatasync: diskprobe), then full passes over a
// log of 64 MiB of updates (100-record batches of ~64-byte records over
// 10,000 keys, 1 MiB segments) on the real disk under the test's temp
// dir. cleaned-MB/s is input bytes cleaned per second of the pass (reads
// plus the rewrite, fsyncs and swaps included); disk-MB/s is the probe.
//
//	go test -run '^$' -bench BenchmarkClean -benchtime 3x ./internal/storage/
func BenchmarkClean(b *testing.B) {
	benchClean(b, false)
}

// BenchmarkCleanTxn is BenchmarkClean over a log of transactions: ten
// batches each, of four producers, every third aborted, and passes told
// of them (CleanOptions.Txns), so the cost of the transaction walk and of
// removing aborted records shows against BenchmarkClean in the same run.
//
//	go test -run '^$' -bench 'BenchmarkClean(Txn)?$' -benchtime 3x ./internal/storage/
func BenchmarkCleanTxn(b *testing.B) {
	benchClean(b, true)
}

func benchClean(b *testing.B, txns bool) {
	dir := b.TempDir()
	disk, err := diskprobe.SyncedWriteBandwidth(dir, 1<<20, 2*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	var in, out, elapsed, cpu float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l, size, aborted := benchCompactLog(b, fmt.Sprintf("%s/log%d", dir, i), 64<<20, 10_000, txns)
		o := CleanOptions{}
		if txns {
			o.Txns, o.Below = &CleanTxns{Aborted: aborted}, l.HighWatermark()
		}
		b.StartTimer()
		start, cpu0 := time.Now(), cpuSeconds()
		for {
			st, err := l.Clean(o)
			if err != nil {
				b.Fatal(err)
			}
			out += float64(st.BytesWritten)
			if !st.Cleaned {
				break
			}
		}
		elapsed += time.Since(start).Seconds()
		cpu += cpuSeconds() - cpu0
		in += float64(size)
		b.StopTimer()
		l.Close()
	}
	b.ReportMetric(in/elapsed/1e6, "cleaned-MB/s")
	b.ReportMetric(disk/1e6, "disk-MB/s")
	b.ReportMetric(in/elapsed/disk, "cleaned/disk")
	b.ReportMetric(out/float64(b.N)/1e6, "MB-written/op")
	// On a shared machine the wall clock counts other jobs' CPU: MB per
	// CPU-second of this process is the cleaner's own cost.
	b.ReportMetric(in/cpu/1e6, "cleaned-MB/cpu-s")
}

// cpuSeconds is the user plus system CPU time of the process.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// benchCompactLog fills a log with about bytes of updates over keys keys
// (in transactions if txns) and seals it, returning the log, its size and
// the aborted transactions.
func benchCompactLog(b *testing.B, dir string, bytes int64, keys int, txns bool) (*Log, int64, []AbortedTxn) {
	o := Options{FS: vfs.Default, Dir: dir, Logger: quiet, Files: testFiles, SegmentBytes: 1 << 20,
		Sync: SyncPolicy{Mode: SyncNever}}
	l, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var size int64
	var aborted []AbortedTxn
	recs := make([]batch.Record, 100)
	seq := map[int64]int32{}
	for n := 0; size < bytes; n++ {
		for j := range recs {
			k := rng.IntN(keys)
			recs[j] = batch.Record{Timestamp: 1, Key: fmt.Appendf(nil, "key-%05d", k), Value: fmt.Appendf(nil, "value-%016x-%032x", k, rng.Uint64())}
		}
		opts := batch.Options{LeaderEpoch: -1}
		pid := int64(n/10%4 + 1) // ten batches a transaction, four producers in turn
		if txns {
			opts.Transactional, opts.Producer = true, &batch.Producer{ID: pid, Epoch: 0, BaseSequence: seq[pid]}
			seq[pid] += int32(len(recs))
		}
		bt, err := batch.Build(recs, opts)
		if err != nil {
			b.Fatal(err)
		}
		offs, err := l.Append(b.Context(), bt)
		if err != nil {
			b.Fatal(err)
		}
		size += int64(len(bt))
		if txns && n%10 == 9 {
			commit := n/10%3 != 0
			m, err := batch.BuildMarker(pid, 0, commit, 0, 1)
			if err != nil {
				b.Fatal(err)
			}
			moffs, err := l.Append(b.Context(), m)
			if err != nil {
				b.Fatal(err)
			}
			if !commit {
				aborted = append(aborted, AbortedTxn{ProducerID: pid, FirstOffset: offs[0] - 900, LastOffset: moffs[0]})
			}
			size += int64(len(m))
		}
	}
	l.wmu.Lock()
	err = l.roll()
	l.wmu.Unlock()
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	return l, size, aborted
}
