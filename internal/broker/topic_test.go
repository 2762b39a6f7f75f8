package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/partitioner"
	"github.com/sluice-mq/sluice/internal/vfs"
)

func (e *env) createTopic(name string, parts int32) {
	e.t.Helper()
	if _, err := e.b.CreateTopic(TopicSettings{Name: name, Partitions: parts}); err != nil {
		e.t.Fatalf("create topic %s: %v", name, err)
	}
}

func (e *env) produce(topic string, recs ...ProduceRecord) []ProduceResult {
	e.t.Helper()
	res, err := e.b.Produce(context.Background(), topic, recs, ProduceOptions{})
	if err != nil {
		e.t.Fatalf("produce: %v", err)
	}
	return res
}

func kv(key, value string) ProduceRecord {
	r := ProduceRecord{Value: []byte(value)}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

// fetchAll reads every record of a partition from offset to the end.
func (e *env) fetchAll(topic string, p int32, from int64) []batch.Record {
	e.t.Helper()
	var out []batch.Record
	for range 1000 {
		res, err := e.b.Fetch(context.Background(), topic, p, from, FetchOptions{MaxBytes: 4096})
		if err != nil {
			e.t.Fatalf("fetch %s/%d@%d: %v", topic, p, from, err)
		}
		if len(res.Batches) == 0 {
			return out
		}
		recs := decodeBatches(e.t, res.Batches)
		for _, r := range recs {
			if r.Offset >= from {
				out = append(out, r)
			}
		}
		from = recs[len(recs)-1].Offset + 1
	}
	e.t.Fatal("fetchAll did not finish")
	return nil
}

func decodeBatches(t testing.TB, data []byte) []batch.Record {
	t.Helper()
	var out []batch.Record
	for len(data) > 0 {
		n, err := batch.FrameSize(data)
		if err != nil {
			t.Fatal(err)
		}
		for r, err := range batch.Records(data[:n]) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		data = data[n:]
	}
	return out
}

func TestTopicAdmin(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("orders", 3)
	if _, err := e.b.CreateTopic(TopicSettings{Name: "orders"}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("create twice: %v", err)
	}
	var ia *InvalidArgumentError
	for _, bad := range []TopicSettings{{Name: "a/b"}, {Name: "x", Partitions: -1}, {Name: "x", CleanupPolicy: "compact,snapshot"}} {
		if _, err := e.b.CreateTopic(bad); !errors.As(err, &ia) {
			t.Fatalf("create %+v: %v", bad, err)
		}
	}
	e.createTopic("other", 1)
	if got := e.b.ListTopics("ord"); len(got) != 1 || got[0].Name != "orders" || got[0].Retention != DefaultTopicRetention {
		t.Fatalf("list: %+v", got)
	}
	e.produce("orders", kv("k1", "v1"), kv("k2", "v2"))
	warn, err := e.b.AddPartitions("orders", 5)
	if err != nil || warn == "" {
		t.Fatalf("add partitions: %q %v", warn, err)
	}
	if _, err := e.b.AddPartitions("orders", 4); !errors.As(err, &ia) {
		t.Fatalf("shrink: %v", err)
	}
	e.restart()
	info, err := e.b.DescribeTopic("orders")
	if err != nil || len(info.Partitions) != 5 {
		t.Fatalf("describe: %+v %v", info, err)
	}
	total := int64(0)
	for _, p := range info.Partitions {
		total += p.HighWatermark - p.LogStartOffset
	}
	if total != 2 {
		t.Fatalf("records after restart: %d", total)
	}
	if errs, err := e.b.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", Generation: -1,
		Offsets: []group.OffsetCommit{{Topic: "orders", Partition: 1, Offset: 1}}}); err != nil || errs[0] != nil {
		t.Fatalf("commit: %v %v", err, errs)
	}
	if err := e.b.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.b.FetchOffset("g", "orders", 1); ok {
		t.Fatal("offsets of a deleted topic kept")
	}
	if _, err := e.b.DescribeTopic("orders"); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("describe deleted: %v", err)
	}
	e.createTopic("orders", 1) // a new topic under the old name starts empty
	if recs := e.fetchAll("orders", 0, 0); len(recs) != 0 {
		t.Fatalf("recreated topic has %d records", len(recs))
	}
	if _, err := e.b.Produce(context.Background(), "nope", []ProduceRecord{kv("", "x")}, ProduceOptions{}); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("produce to unknown topic: %v", err)
	}
}

func TestProducePartitionerMatchesForKey(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("keys", 8)
	var recs []ProduceRecord
	for i := range 100 {
		recs = append(recs, kv(fmt.Sprintf("key-%d", i), fmt.Sprintf("v%d", i)))
	}
	res := e.produce("keys", recs...)
	perPart := map[int32]int64{}
	for i, r := range res {
		if want := partitioner.ForKey(recs[i].Key, 8); r.Partition != want {
			t.Fatalf("key %s went to %d, ForKey says %d", recs[i].Key, r.Partition, want)
		}
		// Offsets within a partition follow input order.
		if r.Offset != perPart[r.Partition] {
			t.Fatalf("record %d offset %d, want %d", i, r.Offset, perPart[r.Partition])
		}
		perPart[r.Partition]++
	}
	for p, n := range perPart {
		recs := e.fetchAll("keys", p, 0)
		if int64(len(recs)) != n {
			t.Fatalf("partition %d has %d records, want %d", p, len(recs), n)
		}
		for _, r := range recs {
			if partitioner.ForKey(r.Key, 8) != p {
				t.Fatalf("record %s in partition %d", r.Key, p)
			}
		}
	}
	// Unkeyed calls spread across partitions, one partition per call.
	seen := map[int32]bool{}
	for range 8 {
		res := e.produce("keys", kv("", "a"), kv("", "b"))
		if res[0].Partition != res[1].Partition {
			t.Fatalf("one unkeyed call split: %+v", res)
		}
		seen[res[0].Partition] = true
	}
	if len(seen) != 8 {
		t.Fatalf("unkeyed calls used %d partitions, want 8", len(seen))
	}
	p := int32(3)
	res = e.produce("keys", ProduceRecord{Key: []byte("key-0"), Value: []byte("x"), Partition: &p})
	if res[0].Partition != 3 {
		t.Fatalf("explicit partition ignored: %+v", res)
	}
}

func TestProduceBadInput(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.b.CreateTopic(TopicSettings{Name: "small", MaxMessageBytes: 2048}); err != nil {
		t.Fatal(err)
	}
	big := ProduceRecord{Value: make([]byte, 4096)}
	if _, err := e.b.Produce(context.Background(), "small", []ProduceRecord{kv("", "ok"), big}, ProduceOptions{}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversized record: %v", err)
	}
	p := int32(7)
	if _, err := e.b.Produce(context.Background(), "small", []ProduceRecord{{Value: []byte("x"), Partition: &p}}, ProduceOptions{}); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
	raw := buildBatch(t, nil, "a", "b")
	raw[len(raw)-1] ^= 0xff
	if _, err := e.b.ProduceBatches(context.Background(), "small", 0, [][]byte{raw}); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupt batch: %v", err)
	}
	if _, err := e.b.ProduceBatches(context.Background(), "small", 0, [][]byte{buildBatch(t, nil, string(make([]byte, 3000)))}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("large batch: %v", err)
	}
	if hw := e.hw("small", 0); hw != 0 {
		t.Fatalf("bad input stored %d records", hw)
	}
	if _, err := e.b.Fetch(context.Background(), "small", 0, 5, FetchOptions{}); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("fetch past the end: %v", err)
	}
}

func (e *env) hw(topic string, p int32) int64 {
	e.t.Helper()
	info, err := e.b.DescribeTopic(topic)
	if err != nil {
		e.t.Fatal(err)
	}
	return info.Partitions[p].HighWatermark
}

func buildBatch(t testing.TB, prod *batch.Producer, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Timestamp: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli(), Value: []byte(v)}
	}
	raw, err := batch.Build(recs, batch.Options{Producer: prod})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestFetchAndListOffsets(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("log", 1)
	for i := range 10 {
		e.produce("log", kv("", fmt.Sprintf("m%d", i)))
		e.clock.Advance(time.Minute)
	}
	recs := e.fetchAll("log", 0, 4)
	if len(recs) != 6 || string(recs[0].Value) != "m4" {
		t.Fatalf("fetch from 4: %d records, first %q", len(recs), recs[0].Value)
	}
	start := newClock().Now()
	for _, c := range []struct {
		ts   int64
		want int64
	}{
		{OffsetEarliest, 0}, {OffsetLatest, 10},
		{start.UnixMilli(), 0}, {start.Add(3 * time.Minute).UnixMilli(), 3},
		{start.Add(3*time.Minute + time.Second).UnixMilli(), 4}, {start.Add(time.Hour).UnixMilli(), -1},
	} {
		got, err := e.b.ListOffsets("log", 0, c.ts)
		if err != nil || got.Offset != c.want {
			t.Fatalf("ListOffsets(%d) = %+v, %v; want %d", c.ts, got, err, c.want)
		}
	}
	sec, err := e.b.FetchSection("log", 0, 2, SectionOptions{MaxBytes: 1 << 20})
	if err != nil || sec.Section.Length == 0 || sec.HighWatermark != 10 {
		t.Fatalf("section: %+v %v", sec, err)
	}
}

func TestFetchLongPollWokenByProduce(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("poll", 1)
	got := make(chan FetchResult, 1)
	go func() {
		res, err := e.b.Fetch(context.Background(), "poll", 0, 0, FetchOptions{MinBytes: 1, MaxWait: time.Minute})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	// The fetch may start before or after the produce; either way it must
	// return the record well before its minute is up.
	e.produce("poll", kv("", "wake"))
	select {
	case res := <-got:
		if recs := decodeBatches(t, res.Batches); len(recs) != 1 || string(recs[0].Value) != "wake" || res.HighWatermark != 1 {
			t.Fatalf("long poll returned %+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("long poll not woken by produce")
	}
	if !e.b.WaitForData(context.Background(), []FetchPosition{{Topic: "poll", Partition: 0, Offset: 0}}, time.Minute) {
		t.Fatal("WaitForData: data is there")
	}
	res, err := e.b.Fetch(context.Background(), "poll", 0, 1, FetchOptions{MinBytes: 1, MaxWait: time.Millisecond})
	if err != nil || len(res.Batches) != 0 {
		t.Fatalf("empty long poll: %+v %v", res, err)
	}
}

// TestProduceBatchesIdempotentRun: consecutive batches of one producer in
// one call (what the Kafka front-end hands over for pipelined requests) are
// stored and recorded as if sent one call each: their own offsets, retries
// answered as duplicates (alone or inside a later run), a gap refused
// after the batches before it were stored.
func TestProduceBatchesIdempotentRun(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("run", 1)
	pid, err := e.b.InitProducerID("")
	if err != nil {
		t.Fatal(err)
	}
	prod := func(seq int32) *batch.Producer {
		return &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: seq}
	}
	b0, b1, b2 := buildBatch(t, prod(0), "a", "b"), buildBatch(t, prod(2), "c"), buildBatch(t, prod(3), "d", "e")
	ctx := context.Background()
	res, err := e.b.ProduceBatches(ctx, "run", 0, [][]byte{b0, b1, b2})
	if err != nil || !slices.Equal(res.BaseOffsets, []int64{0, 2, 3}) || slices.Contains(res.Duplicate, true) {
		t.Fatalf("run: %+v %v", res, err)
	}
	if _, err := e.produceRaw("run", 0, b1); err != nil {
		t.Fatal(err)
	}
	// A retried run: every batch a duplicate with its first offset.
	res, err = e.b.ProduceBatches(ctx, "run", 0, [][]byte{b1, b2})
	if err != nil || !slices.Equal(res.BaseOffsets, []int64{2, 3}) || !slices.Equal(res.Duplicate, []bool{true, true}) {
		t.Fatalf("retried run: %+v %v", res, err)
	}
	// A retry followed by new batches; then a gap, after which nothing is stored.
	b3, b4 := buildBatch(t, prod(5), "f"), buildBatch(t, prod(6), "g")
	res, err = e.b.ProduceBatches(ctx, "run", 0, [][]byte{b2, b3, b4})
	if err != nil || !slices.Equal(res.BaseOffsets, []int64{3, 5, 6}) || !slices.Equal(res.Duplicate, []bool{true, false, false}) {
		t.Fatalf("retry then new: %+v %v", res, err)
	}
	b5, gap := buildBatch(t, prod(7), "h"), buildBatch(t, prod(9), "x")
	if _, err := e.b.ProduceBatches(ctx, "run", 0, [][]byte{b5, gap}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if hw := e.hw("run", 0); hw != 8 {
		t.Fatalf("high watermark %d, want 8 (the batch before the gap stored)", hw)
	}
	got := e.fetchAll("run", 0, 0)
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	if !slices.Equal(vals, []string{"a", "b", "c", "d", "e", "f", "g", "h"}) {
		t.Fatalf("log holds %q", vals)
	}
	// Producer state holds the run's batches after a restart too.
	e.restart()
	if r, err := e.produceRaw("run", 0, b4); err != nil || r.BaseOffsets[0] != 6 || !r.Duplicate[0] {
		t.Fatalf("retry after restart: %+v %v", r, err)
	}
}

// A partition's size is the data in it, not the zeros a preallocating
// segment holds ahead of its appends: a stat of the file counted up to 1 MiB
// of them, which DescribeTopic reported and size retention acted on.
func TestSizeCountsDataNotPreallocation(t *testing.T) {
	b, err := Open(Options{Dir: t.TempDir(), FS: vfs.Default, Logger: quietLogger(), HeadroomBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic(TopicSettings{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(context.Background(), "t", []ProduceRecord{kv("", "x")}, ProduceOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := b.DescribeTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Partitions[0].SizeBytes; got <= 0 || got > 4096 {
		t.Fatalf("one small record's partition is %d bytes", got)
	}
}
