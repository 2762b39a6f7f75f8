package kafka

import (
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/partitioner"
)

// TestFranzCodecs produces 10,000 keyed records idempotently (franz-go's
// default) with each compression codec, checks every key landed on the
// partition Kafka's partitioner picks, and consumes them all back in order.
func TestFranzCodecs(t *testing.T) {
	n := startNode(t, "")
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "codec-" + c.name
			const parts, count = 4, 10000
			n.createTopic(topic, parts)
			ctx := testCtx(t, 60*time.Second)
			prod := n.client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.codec), kgo.RequiredAcks(kgo.AllISRAcks()))
			recs := make([]*kgo.Record, count)
			for i := range recs {
				recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%101), Value: fmt.Appendf(nil, "%d", i)}
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if want := partitioner.ForKey(r.Key, parts); r.Partition != want {
					t.Fatalf("key %s went to partition %d, partitioner.ForKey says %d", r.Key, r.Partition, want)
				}
			}
			got := consumeN(t, n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), count)
			checkFranzOrder(t, got)
		})
	}
}

// consumeN polls until count records arrived.
func consumeN(t *testing.T, cl *kgo.Client, count int) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	var out []*kgo.Record
	for len(out) < count {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		out = append(out, fs.Records()...)
	}
	if len(out) != count {
		t.Fatalf("got %d records, want %d", len(out), count)
	}
	return out
}

// checkFranzOrder checks offsets are dense and increasing per partition and
// each key's values (produce sequence numbers) increase.
func checkFranzOrder(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	next := map[int32]int64{}
	last := map[string]int{}
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		v, _ := strconv.Atoi(string(r.Value))
		if prev, ok := last[string(r.Key)]; ok && v <= prev {
			t.Fatalf("key %s: value %d after %d", r.Key, v, prev)
		}
		last[string(r.Key)] = v
	}
}

func TestFranzListOffsetsByTime(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("times", 1)
	ctx := testCtx(t, 30*time.Second)
	cl := n.client(kgo.DefaultProduceTopic("times"))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 10 {
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{{base, 0}, {base.Add(5 * time.Minute), 5}, {base.Add(5*time.Minute + time.Second), 6}, {base.Add(time.Hour), -1}} {
		lo, err := adm.ListOffsetsAfterMilli(ctx, tc.at.UnixMilli(), "times")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("times", 0)
		// Kafka answers -1 past the last record; kadm turns that into the end.
		if o.Err != nil || (o.Offset != tc.want && !(tc.want == -1 && o.Offset == 10)) {
			t.Errorf("offset after %v: %+v, want %d", tc.at.Sub(base), o, tc.want)
		}
	}
	start, err := adm.ListStartOffsets(ctx, "times")
	if err != nil || start["times"][0].Offset != 0 {
		t.Fatalf("start offsets: %v %v", start, err)
	}
	end, err := adm.ListEndOffsets(ctx, "times")
	if err != nil || end["times"][0].Offset != 10 {
		t.Fatalf("end offsets: %v %v", end, err)
	}
}

func TestFranzAdmin(t *testing.T) {
	n := startNode(t, "")
	ctx := testCtx(t, 30*time.Second)
	adm := n.admin()
	ret := "3600000"
	cr, err := adm.CreateTopic(ctx, 2, -1, map[string]*string{"retention.ms": &ret}, "adm")
	if err != nil || cr.Err != nil {
		t.Fatalf("create: %v %v", err, cr.Err)
	}
	if cr, _ := adm.CreateTopic(ctx, 2, -1, nil, "adm"); cr.Err == nil {
		t.Fatal("creating an existing topic succeeded")
	}
	if cr, _ := adm.CreateTopic(ctx, 1, 3, nil, "rf3"); cr.Err == nil {
		t.Fatal("replication factor 3 on one node succeeded")
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.On("adm", nil)
	if err != nil || cfg.Err != nil {
		t.Fatalf("describe configs: %v %v", err, cfg.Err)
	}
	found := false
	for _, c := range cfg.Configs {
		if c.Key == "retention.ms" && c.MaybeValue() == ret {
			found = true
		}
	}
	if !found {
		t.Fatalf("retention.ms not %s in %+v", ret, cfg.Configs)
	}
	if _, err := adm.UpdatePartitions(ctx, 5, "adm"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "adm")
	if err != nil || len(td["adm"].Partitions) != 5 {
		t.Fatalf("after adding partitions: %+v %v", td["adm"], err)
	}
	dr, err := adm.DeleteTopics(ctx, "adm")
	if err != nil || dr["adm"].Err != nil {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	td, err = adm.ListTopics(ctx)
	if err != nil || slices.Contains(td.Names(), "adm") {
		t.Fatalf("topic still listed: %v %v", td.Names(), err)
	}
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil || len(meta.Brokers) != 1 || meta.Brokers[0].Host != "127.0.0.1" {
		t.Fatalf("broker metadata: %+v %v", meta, err)
	}
}

// TestFranzProduceErrors checks a produce to a missing topic fails with
// UNKNOWN_TOPIC_OR_PARTITION and an over-large record with
// MESSAGE_TOO_LARGE, and that nothing was written.
func TestFranzProduceErrors(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("small", 1)
	ctx := testCtx(t, 30*time.Second)
	cl := n.client(kgo.ProducerBatchMaxBytes(4<<20), kgo.RecordRetries(2), kgo.UnknownTopicRetries(1))
	// Random bytes: the limit applies to the batch as stored, compressed.
	val := make([]byte, 2<<20)
	rand.Read(val)
	big := &kgo.Record{Topic: "small", Value: val}
	if err := cl.ProduceSync(ctx, big).FirstErr(); err == nil {
		t.Fatal("2 MiB record accepted by a 1 MiB topic")
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "missing", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("produce to a missing topic succeeded")
	}
	info, err := n.b.DescribeTopic("small")
	if err != nil || info.Partitions[0].HighWatermark != 0 {
		t.Fatalf("high watermark after refused produces: %+v %v", info, err)
	}
}
