package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkProduceBatches times the CPU of a Kafka client's produce as the
// broker sees it: ProduceBatches of ready-made batches (16 or 256 records
// of 1 KiB, uncompressed) from one caller, with --fsync never so the disk
// does not hide what validating, stamping and copying a batch cost. One op
// is one batch; it is the benchmark for where a batch is validated
// (docs/architecture.md, "One validation per batch").
//
//	go test -run '^$' -bench ProduceBatches -count 6 ./internal/broker/
func BenchmarkProduceBatches(b *testing.B) {
	for _, records := range []int{16, 256} {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
			br, err := Open(Options{Dir: b.TempDir(), FS: vfs.Default, Logger: quietLogger(),
				Sync: storage.SyncPolicy{Mode: storage.SyncNever}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { br.Close() })
			if _, err := br.CreateTopic(TopicSettings{Name: "bench", MaxMessageBytes: 1 << 20}); err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			recs := make([]batch.Record, records)
			for i := range recs {
				v := make([]byte, 1024)
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
				recs[i] = batch.Record{Timestamp: time.Now().UnixMilli(), Value: v}
			}
			raw, err := batch.Build(recs, batch.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := br.ProduceBatches(context.Background(), "bench", 0, [][]byte{raw}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIdempotentProducers times idempotent producers writing to one
// partition on the real disk (SyncAlways under b.TempDir), each producer a
// goroutine sending one-record batches of 1 KiB one after another: the shape
// of many application instances producing to a topic with few partitions.
// One op is one batch. With the producer lock held across the sync each
// producer waited for the one before it; now their batches share syncs.
//
//	go test -run '^$' -bench IdempotentProducers -count 6 ./internal/broker/
func BenchmarkIdempotentProducers(b *testing.B) {
	for _, producers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			br, err := Open(Options{Dir: b.TempDir(), FS: vfs.Default, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { br.Close() })
			if _, err := br.CreateTopic(TopicSettings{Name: "bench"}); err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 1024)
			pids := make([]batch.Producer, producers)
			for i := range pids {
				pid, err := br.InitProducerID("")
				if err != nil {
					b.Fatal(err)
				}
				pids[i] = batch.Producer{ID: pid.ID, Epoch: pid.Epoch}
			}
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			var wg sync.WaitGroup
			for i := range pids {
				n := b.N / producers
				if i < b.N%producers {
					n++
				}
				wg.Go(func() {
					p := pids[i]
					for seq := range int32(n) {
						p.BaseSequence = seq
						raw, err := batch.Build([]batch.Record{{Value: value}}, batch.Options{Producer: &p})
						if err == nil {
							_, err = br.ProduceBatches(context.Background(), "bench", 0, [][]byte{raw})
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
