package kafka

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// TestFetchStepsOverAQuarantinedTail: the last batches of a partition are damaged on
// disk after a clean close (synced bytes, a failing disk): at the next open they are
// quarantined and the high watermark stays past them. A fetch at an offset inside that
// range answers an empty batch spanning it (what compaction leaves, KAFKA-5443), so the
// consumer moves to the high watermark. Before, it answered nothing, and every Kafka
// consumer of the partition fetched the same offset forever (kcat never reached the end,
// the group's lag stayed), until a new record came.
func TestFetchStepsOverAQuarantinedTail(t *testing.T) {
	dir := t.TempDir()
	n := startNodeSync(t, dir, broker.SyncPolicy{Mode: broker.SyncAlways})
	n.createTopic("gap", 1)
	cl := n.client(kgo.DefaultProduceTopic("gap"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testCtx(t, 30*time.Second)
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	n.stop()

	// Damage the record bytes of the last two batches (offsets 8 and 9).
	segs, _ := filepath.Glob(filepath.Join(dir, "topics", "*-gap", "*", "*.log"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	var starts []int64
	for pos := int64(0); pos < int64(len(data)); {
		size, err := batch.FrameSize(data[pos:])
		if err != nil || size <= 0 {
			break // preallocated zeros
		}
		starts = append(starts, pos)
		pos += size
	}
	if len(starts) != 10 {
		t.Fatalf("%d batches in the segment, want 10", len(starts))
	}
	for _, at := range starts[8:] {
		data[at+batch.HeaderSize] ^= 0xff // the first record byte: the CRC no longer matches
	}
	if err := os.WriteFile(segs[0], data, 0o600); err != nil {
		t.Fatal(err)
	}

	n = startNodeSync(t, dir, broker.SyncPolicy{Mode: broker.SyncAlways})
	raw := n.client(kgo.MaxVersions(kversion.V2_8_0())) // Fetch v12: by topic name
	resp, err := fetchReq(12, "gap", 0, 8, 0).RequestWith(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 10 {
		t.Fatalf("fetch at 8: error %d, high watermark %d; want 0 and 10", p.ErrorCode, p.HighWatermark)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(p.RecordBatches); err != nil {
		t.Fatalf("fetch at 8 answered %d bytes, not a batch: %v", len(p.RecordBatches), err)
	}
	if rb.FirstOffset != 8 || rb.FirstOffset+int64(rb.LastOffsetDelta) != 9 || rb.NumRecords != 0 ||
		uint32(rb.CRC) != batch.ComputeCRC(p.RecordBatches[:len(p.RecordBatches)]) {
		t.Errorf("fetch at 8: batch %d..%d of %d records (crc %08x); want an empty batch 8..9 with a valid CRC",
			rb.FirstOffset, rb.FirstOffset+int64(rb.LastOffsetDelta), rb.NumRecords, uint32(rb.CRC))
	}

	// A franz-go consumer reads the eight good records and moves on to the next one
	// produced, at 10.
	cons := n.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"gap": {0: kgo.NewOffset().At(0)}}))
	var got []int64
	for len(got) < 8 && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
	}
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	cons.PollFetches(pctx) // steps over the gap
	cancel()
	if err := n.client(kgo.DefaultProduceTopic("gap")).ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for len(got) < 9 && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
	}
	if len(got) != 9 || got[7] != 7 || got[8] != 10 {
		t.Errorf("consumed offsets %v, want 0..7 then 10", got)
	}
}
