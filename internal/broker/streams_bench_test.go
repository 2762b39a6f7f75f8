package broker

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/diskprobe"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// diskLimits measures the disk under dir once per benchmark run, so the
// broker's figures can be read next to what the disk itself can do in the
// same run (the disk may be shared and noisy).
var diskLimits = sync.OnceValues(func() (diskprobe.Limits, error) {
	dir, err := os.MkdirTemp("", "sluice-diskprobe")
	if err != nil {
		return diskprobe.Limits{}, err
	}
	defer os.RemoveAll(dir)
	return diskprobe.Measure(dir, time.Second)
})

var diskLogged atomic.Bool

func reportDisk(b *testing.B) {
	b.Helper()
	l, err := diskLimits()
	if err != nil {
		b.Logf("disk probe: %v", err)
		return
	}
	if !diskLogged.Swap(true) {
		b.Logf("%s", l)
	}
	b.ReportMetric(l.FdatasyncPerSec, "disk-fsync/s")
	b.ReportMetric(l.SyncedBytesPerS/1e6, "disk-MB/s")
}

func benchBroker(b *testing.B) *Broker {
	b.Helper()
	br, err := Open(Options{Dir: b.TempDir(), FS: vfs.Default, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	return br
}

// BenchmarkProduce: 1 KiB records on the real disk with fsync always, in
// calls of 1, 16 or 256 records, from 16 concurrent producers (group commit
// shares fsyncs between them) to 1 or 8 partitions. One op is one record.
func BenchmarkProduce(b *testing.B) {
	for _, parts := range []int32{1, 8} {
		for _, size := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("partitions=%d/batch=%d", parts, size), func(b *testing.B) {
				benchProduce(b, parts, size)
			})
		}
	}
}

func benchProduce(b *testing.B, parts int32, size int) {
	br := benchBroker(b)
	if _, err := br.CreateTopic(TopicSettings{Name: "bench", Partitions: parts}); err != nil {
		b.Fatal(err)
	}
	recs := make([]ProduceRecord, size)
	for i := range recs {
		recs[i] = ProduceRecord{Value: make([]byte, 1024)} // unkeyed: each call to the next partition
	}
	const producers = 16
	calls := (b.N + size - 1) / size
	var next atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	for range producers {
		wg.Go(func() {
			for next.Add(1) <= int64(calls) {
				if _, err := br.Produce(context.Background(), "bench", recs, ProduceOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(calls*size)/time.Since(start).Seconds(), "records/s")
	b.StopTimer()
	reportDisk(b) // after the timed part: ResetTimer would drop the metrics
}

// BenchmarkFetch reads a partition of 1 KiB records (written in batches of
// 16) from the start, 1 MiB per fetch, on the real disk. One op is one
// record.
func BenchmarkFetch(b *testing.B) {
	br := benchBroker(b)
	if _, err := br.CreateTopic(TopicSettings{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	recs := make([]ProduceRecord, 16)
	for i := range recs {
		recs[i] = ProduceRecord{Value: make([]byte, 1024)}
	}
	const total = 32 << 10 // 32 Mi of records
	for range total / len(recs) {
		if _, err := br.Produce(context.Background(), "bench", recs, ProduceOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(1024)
	b.ResetTimer()
	off, read := int64(0), 0
	for read < b.N {
		res, err := br.Fetch(context.Background(), "bench", 0, off, FetchOptions{MaxBytes: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		n := len(decodeBatches(b, res.Batches))
		read += n
		off += int64(n)
		if off >= total {
			off = 0
		}
	}
	b.StopTimer()
	reportDisk(b)
}

// BenchmarkGroupRebalance: 10 broker-assigned members own 100 partitions;
// one op is a full rebalance: a member leaves, a new one joins, and the
// other nine rejoin (as their heartbeats would tell them to) until all ten
// have their assignments in the new generation.
func BenchmarkGroupRebalance(b *testing.B) {
	br := benchBroker(b)
	if _, err := br.CreateTopic(TopicSettings{Name: "bench", Partitions: 100}); err != nil {
		b.Fatal(err)
	}
	var ids []string
	for range 10 {
		ids = addMember(b, br, ids)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := br.LeaveGroup("g", []group.MemberRef{{MemberID: ids[0]}}); err != nil {
			b.Fatal(err)
		}
		ids = addMember(b, br, ids[1:])
	}
}

// addMember joins a new member and has the existing ones rejoin, all in
// one generation: the new join waits in the rebalance it started until
// every existing member rejoined.
func addMember(b *testing.B, br *Broker, ids []string) []string {
	all := append(append([]string(nil), ids...), "")
	gens := make([]int32, len(all))
	join := func(i int) {
		a, err := br.JoinConsumer(context.Background(), ConsumerJoin{Group: "g", MemberID: all[i], ClientID: "m",
			Topics: []string{"bench"}, SessionTimeout: time.Minute})
		if err != nil {
			b.Error(err)
		}
		all[i], gens[i] = a.MemberID, a.Generation
	}
	var wg sync.WaitGroup
	wg.Go(func() { join(len(all) - 1) })
	for i := 0; len(ids) > 0; i++ {
		if info, _ := br.DescribeGroup("g"); len(info.Members) == len(all) {
			break
		}
		if i > 1_000_000 {
			b.Fatal("the new member never joined")
		}
		runtime.Gosched()
	}
	for i := range ids {
		wg.Go(func() { join(i) })
	}
	wg.Wait()
	for _, g := range gens {
		if g != gens[0] {
			b.Fatalf("members in generations %v", gens)
		}
	}
	return all
}
