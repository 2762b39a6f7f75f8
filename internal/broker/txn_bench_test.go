package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// BenchmarkTxnOpen measures how long a broker takes to open a partition
// of 1,000,000 one-record batches (~100 MB, every 100th transaction
// aborted) on the real disk: with the transaction snapshot a clean close
// leaves, and without it (a log from before transactions, or a snapshot
// damaged), when the whole log is scanned:
//
//	go test -run '^$' -bench TxnOpen -benchtime 3x ./internal/broker
func BenchmarkTxnOpen(b *testing.B) {
	dir := b.TempDir()
	opts := Options{Dir: dir, Logger: quietLogger(), Sync: SyncPolicy{Mode: SyncNever}}
	br, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := br.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		b.Fatal(err)
	}
	pid, _ := br.InitTransactionalProducer("bench", time.Minute, TxnProducer{ID: -1, Epoch: -1})
	seq := int32(0)
	ctx := context.Background()
	for txn := range 1000 {
		if _, err := br.AddPartitionsToTxn("bench", pid.ID, pid.Epoch, []TxnPartition{{Topic: "t"}}); err != nil {
			b.Fatal(err)
		}
		var raws [][]byte
		for range 1000 {
			raw, _ := batch.Build([]batch.Record{{Timestamp: time.Now().UnixMilli(), Value: make([]byte, 30)}},
				batch.Options{Producer: &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: seq}, Transactional: true})
			raws, seq = append(raws, raw), seq+1
		}
		if _, err := br.ProduceBatches(ctx, "t", 0, raws); err != nil {
			b.Fatal(err)
		}
		if err := br.EndTxn("bench", pid.ID, pid.Epoch, txn%100 != 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := br.Close(); err != nil {
		b.Fatal(err)
	}
	snap := filepath.Join(dir, "topics", "1-t", "0", txnSnapshotFile)
	for _, withSnapshot := range []bool{true, false} {
		name := "snapshot"
		if !withSnapshot {
			name = "scan"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if !withSnapshot {
					os.Remove(snap)
				}
				start := time.Now()
				br, err := Open(opts)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(time.Since(start).Milliseconds()), "open-ms")
				if st, _ := br.FetchSection("t", 0, 0, SectionOptions{ReadCommitted: true}); st.LastStableOffset != st.HighWatermark {
					b.Fatalf("state %+v", st.PartitionState)
				}
				br.Close()
			}
		})
	}
}
