package kafka

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-mq/sluice/internal/diskprobe"
)

// BenchmarkTxn compares, in one run, idempotent produce with
// transactional produce in transactions of 100 and 1,000 records (1 KiB
// records, 4 partitions, a broker that fsyncs every acknowledged write),
// and measures end-to-end latency (produce start to a consumer's poll) of
// one-record transactions read with read_committed, beside idempotent
// records read with read_uncommitted; the "part1" runs keep franz-go on
// KIP-890 part 1, to show what part 2's epoch bump per transaction costs:
//
//	go test -run '^$' -bench Txn -benchtime 20000x ./internal/kafka
func BenchmarkTxn(b *testing.B) {
	if l, err := diskprobe.Measure(b.TempDir(), 500*time.Millisecond); err == nil {
		b.Logf("%s", l)
	}
	part1 := kgo.MaxVersions(txnPart1Versions()) // KIP-890 part 1 only: no epoch bump per transaction
	b.Run("produce/idempotent", func(b *testing.B) { benchTxnProduce(b, 0) })
	b.Run("produce/txn=100", func(b *testing.B) { benchTxnProduce(b, 100) })
	b.Run("produce/txn=100/part1", func(b *testing.B) { benchTxnProduce(b, 100, part1) })
	b.Run("produce/txn=1000", func(b *testing.B) { benchTxnProduce(b, 1000) })
	b.Run("latency/read_uncommitted", func(b *testing.B) { benchTxnLatency(b, false) })
	b.Run("latency/read_committed", func(b *testing.B) { benchTxnLatency(b, true) })
	b.Run("latency/read_committed/part1", func(b *testing.B) { benchTxnLatency(b, true, part1) })
}

// txnPart1Versions caps EndTxn at v4, which keeps franz-go on KIP-890
// part 1 (AddPartitionsToTxn, one epoch per InitProducerId) even though
// sluice announces transaction.version 2.
func txnPart1Versions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	return v
}

// benchTxnProduce produces b.N records, per transaction of size records
// (0: idempotent, no transaction).
func benchTxnProduce(b *testing.B, size int, extra ...kgo.Opt) {
	n, topic := benchNode(b, 4)
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression())}
	if size > 0 {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("bench-%d", size)))
	}
	opts = append(opts, extra...)
	cl := n.client(opts...)
	ctx := testCtx(b, 10*time.Minute)
	vals := make([][]byte, 64)
	for i := range vals {
		vals[i] = make([]byte, benchRecordBytes)
		rand.Read(vals[i])
	}
	b.SetBytes(benchRecordBytes)
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		k := b.N - done
		if size > 0 {
			k = min(k, size)
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
		}
		for i := range k {
			cl.Produce(ctx, &kgo.Record{Value: vals[(done+i)%len(vals)]}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if size > 0 {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
		done += k
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// benchTxnLatency sends b.N records one at a time (each its own
// transaction when committed is set) and reports the p50 and p99 of the
// time from its send to its arrival at a consumer.
func benchTxnLatency(b *testing.B, committed bool, extra ...kgo.Opt) {
	n, topic := benchNode(b, 1)
	popts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0)}
	level := kgo.ReadUncommitted()
	if committed {
		popts, level = append(popts, kgo.TransactionalID("latency")), kgo.ReadCommitted()
	}
	popts = append(popts, extra...)
	p := n.client(popts...)
	c := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(time.Second))
	ctx := testCtx(b, 10*time.Minute)
	c.PollFetches(testCtx(b, 200*time.Millisecond)) // join the end before producing
	lat := make([]time.Duration, 0, b.N)
	got := make(chan struct{}, b.N)
	go func() {
		for len(got) < cap(got) && ctx.Err() == nil {
			c.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				sent := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
				lat = append(lat, time.Since(sent))
				got <- struct{}{}
			})
		}
	}()
	b.ResetTimer()
	for range b.N {
		v := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
		if committed {
			if err := p.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		if committed {
			if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
		<-got
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
