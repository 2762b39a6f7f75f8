package kafka

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/diskprobe"
)

// BenchmarkFranz measures a franz-go producer (1 KiB records, acks=all,
// idempotent) and consumer against the front-end on loopback, over a broker
// that fsyncs every acknowledged write, with 1 and 8 partitions. The disk's
// own synced bandwidth, measured in the same run, is reported beside it:
//
//	go test -v -run '^$' -bench Franz -benchtime 100000x ./internal/kafka
func BenchmarkFranz(b *testing.B) {
	dir := b.TempDir()
	if l, err := diskprobe.Measure(dir, 500*time.Millisecond); err == nil {
		b.Logf("%s", l)
	}
	for _, parts := range []int32{1, 8} {
		b.Run(fmt.Sprintf("produce/partitions=%d", parts), func(b *testing.B) { benchProduce(b, parts) })
		b.Run(fmt.Sprintf("consume/partitions=%d", parts), func(b *testing.B) { benchConsume(b, parts) })
	}
}

const benchRecordBytes = 1024

func benchNode(b *testing.B, parts int32) (*node, string) {
	n := startNodeSync(b, "", broker.SyncPolicy{Mode: broker.SyncAlways})
	topic := fmt.Sprintf("bench%d", parts)
	n.createTopic(topic, parts)
	return n, topic
}

// produceAll produces count records of benchRecordBytes, waiting for all.
func produceAll(b *testing.B, n *node, topic string, count int) {
	// Uncompressed random values: the disk writes every byte counted.
	cl := n.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := testCtx(b, 5*time.Minute)
	vals := make([][]byte, 64)
	for i := range vals {
		vals[i] = make([]byte, benchRecordBytes)
		rand.Read(vals[i])
	}
	errs := make(chan error, 1)
	for i := range count {
		cl.Produce(ctx, &kgo.Record{Value: vals[i%len(vals)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

func benchProduce(b *testing.B, parts int32) {
	n, topic := benchNode(b, parts)
	b.SetBytes(benchRecordBytes)
	b.ResetTimer()
	start := time.Now()
	produceAll(b, n, topic, b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

func benchConsume(b *testing.B, parts int32) {
	n, topic := benchNode(b, parts)
	produceAll(b, n, topic, b.N)
	cl := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(b, 5*time.Minute)
	b.SetBytes(benchRecordBytes)
	b.ResetTimer()
	start := time.Now()
	for got := 0; got < b.N; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			b.Fatal(err)
		}
		got += fs.NumRecords()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
