package multiraft_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/engine"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/diskprobe"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkProposeOnDisk: BenchmarkPropose on the real disk. Three hosts in one process,
// each on raftstore in its own directory under b.TempDir() (vfs.Default: real write(2)
// and fdatasync), memnet between them, n1 leading every group, 64 proposers spread over
// the groups, 100-byte entries; each Propose returns once committed (a quorum fsynced)
// and applied on n1. Reports proposals/s, the commit latency a proposer sees (p50, p99),
// group commit (proposals and group Readys per Engine.Sync on n1), and, measured in the
// same run on the same file system, the disk's own fdatasync rate and latency
// (internal/diskprobe, one file rewritten and synced for a second). Ticks are 100 ms.
//
//	go test -run '^$' -bench ProposeOnDisk -benchtime 5000x ./internal/cluster/multiraft/
func BenchmarkProposeOnDisk(b *testing.B) {
	for _, groups := range []int{1, 100} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) { benchProposeOnDisk(b, groups) })
	}
}

func benchProposeOnDisk(b *testing.B, groups int) {
	root := b.TempDir()
	rate, p50, p99, err := diskprobe.FdatasyncRate(root, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	// 100 ms ticks, as a deployment would run (docs/cluster.md): a 1-2 s election timeout.
	// With the 10 ms of BenchmarkPropose, a round of 100 groups' fdatasyncs on a loaded
	// machine outlasted a follower's 100-190 ms timeout and n1 lost its leadership.
	lc := newLiveClusterOn(b, 3, groups, 100*time.Millisecond, multiraft.Config{},
		func(id multiraft.NodeID) multiraft.Engine {
			e, err := engine.Open(engine.Options{Node: id, Store: raftstore.Options{
				FS: vfs.Default, Dir: filepath.Join(root, fmt.Sprintf("n%d", id))}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = e.Close() }) // after the hosts stop (cleanups run last first)
			return e
		})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data := make([]byte, 100)
	var next, failed atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, 64)
	var wg sync.WaitGroup
	before := lc.hosts[0].Stats()
	b.ResetTimer()
	start := time.Now()
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				g := multiraft.GroupID(1 + (int(i)+w)%groups)
				t0 := time.Now()
				if _, err := lc.hosts[0].Propose(ctx, g, data); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d proposals failed, the first with: %v", f, firstErr.Load())
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	after := lc.hosts[0].Stats()
	// after ResetTimer, which drops the metrics reported before it
	b.ReportMetric(rate, "disk-fdatasync/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "disk-fdatasync-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "disk-fdatasync-p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "commit-p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "commit-p99-ms")
	if syncs := after.Syncs - before.Syncs; syncs > 0 {
		b.ReportMetric(float64(after.Readys-before.Readys)/float64(syncs), "readys/sync")
		b.ReportMetric(float64(b.N)/float64(syncs), "proposals/sync")
	}
}
