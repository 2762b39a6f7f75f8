package kafka

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/batch"
)

// TestEveryVersion sends a default request of every served API at every
// served version and decodes the answer: the table ApiVersions advertises
// is what the server really speaks.
func TestEveryVersion(t *testing.T) {
	n := startNode(t, "")
	r := n.raw()
	for _, key := range sortedKeys() {
		a := apis[key]
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			if key == 0 { // acks=0 would get no answer
				req.(*kmsg.ProduceRequest).Acks = -1
			}
			r.do(req)
		}
	}
}

func TestApiVersions(t *testing.T) {
	n := startNode(t, "")
	r := n.raw()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
	resp := r.do(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("ApiVersions v3: %+v", resp)
	}
	kip848 := 0
	for _, k := range resp.ApiKeys {
		switch k.ApiKey {
		case 68, 69: // franz-go speaks KIP-848 only from v1
			if k.MinVersion != 0 || k.MaxVersion != 1 {
				t.Errorf("KIP-848 key %d advertised %d-%d, want 0-1", k.ApiKey, k.MinVersion, k.MaxVersion)
			}
			kip848++
		case 76, 77: // KIP-932 share groups: Kafka 4.1+ serves v1 only (v0 was early access)
			if k.MinVersion != 1 || k.MaxVersion != 1 {
				t.Errorf("KIP-932 key %d advertised %d-%d, want 1-1", k.ApiKey, k.MinVersion, k.MaxVersion)
			}
		}
	}
	if kip848 != 2 {
		t.Fatal("KIP-848 ConsumerGroupHeartbeat and ConsumerGroupDescribe not both advertised")
	}

	// A version from the future: the client cannot know its response
	// format, so the answer is v0 with UNSUPPORTED_VERSION.
	r.corr++
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 77, 0, 0, 0, byte(r.corr), 0xff, 0xff, 0}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := r.c.Write(frame); err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.SetVersion(0)
	old := r.recv(v0, r.corr).(*kmsg.ApiVersionsResponse)
	if old.ErrorCode != kerr.UnsupportedVersion.Code || len(old.ApiKeys) == 0 {
		t.Fatalf("future ApiVersions: %+v", old)
	}
}

// TestPipelinedInOrder sends a burst of requests before reading any: the
// answers come back in request order, and acks=0 produces answer nothing.
func TestPipelinedInOrder(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("pipe", 1)
	r := n.raw()
	var reqs []kmsg.Request
	var corrs []int32
	for i := range 20 {
		var req kmsg.Request
		switch i % 3 {
		case 0:
			req = kmsg.NewPtrMetadataRequest()
		case 1:
			req = produceReq(7, 1, "pipe", 0, buildBatch(t, 2, nil))
		default:
			r.send(produceReq(9, 0, "pipe", 0, buildBatch(t, 1, nil))) // acks=0: no answer
			req = kmsg.NewPtrApiVersionsRequest()
		}
		reqs, corrs = append(reqs, req), append(corrs, r.send(req))
	}
	for i, req := range reqs {
		r.recv(req, corrs[i])
	}
	info, _ := n.b.DescribeTopic("pipe")
	// 7 acks=1 produces of 2 records and 6 acks=0 produces of 1.
	if hw := info.Partitions[0].HighWatermark; hw != 7*2+6 {
		t.Fatalf("high watermark %d, want %d", hw, 7*2+6)
	}
}

func TestMalformedFrames(t *testing.T) {
	n := startNode(t, "")
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"size too small", []byte{0, 0, 0, 3, 0, 1, 2}},
		{"size over the maximum", []byte{0x7f, 0xff, 0xff, 0xff}},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0}},
		{"unknown api key", []byte{0, 0, 0, 10, 0x7f, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff}},
		{"unsupported produce version", []byte{0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff}},
		{"client id longer than the frame", []byte{0, 0, 0, 10, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff}},
		{"truncated body", []byte{0, 0, 0, 12, 0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.raw()
			if _, err := r.c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			r.expectClosed()
		})
	}
	// The server still serves.
	n.raw().do(kmsg.NewPtrMetadataRequest())
}

// TestProduceValidation: corrupt batches are refused per partition with
// Kafka's codes and change nothing; an idempotent retry answers the
// original offset.
func TestProduceValidation(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("val", 1)
	r := n.raw()
	produce := func(records []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		resp := r.do(produceReq(9, -1, "val", 0, records)).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0]
	}
	good := buildBatch(t, 3, nil)
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	badMagic := append([]byte(nil), good...)
	badMagic[16] = 1
	for _, tc := range []struct {
		name    string
		records []byte
		code    int16
	}{
		{"crc", badCRC, kerr.CorruptMessage.Code},
		{"magic", badMagic, kerr.CorruptMessage.Code},
		{"truncated", good[:len(good)-5], kerr.CorruptMessage.Code},
		{"empty", nil, kerr.CorruptMessage.Code},
	} {
		if p := produce(tc.records); p.ErrorCode != tc.code {
			t.Errorf("%s: error %d, want %d", tc.name, p.ErrorCode, tc.code)
		}
	}
	resp := r.do(produceReq(9, -1, "nope", 0, good)).(*kmsg.ProduceResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: error %d", c)
	}
	if p := produce(good); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("good batch: %+v", p)
	}

	pid := r.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	mk := func(seq int32) []byte {
		return buildBatch(t, 2, &batch.Producer{ID: pid.ProducerID, Epoch: pid.ProducerEpoch, BaseSequence: seq})
	}
	first := produce(mk(0))
	if first.ErrorCode != 0 || first.BaseOffset != 3 {
		t.Fatalf("idempotent batch: %+v", first)
	}
	if dup := produce(mk(0)); dup.ErrorCode != 0 || dup.BaseOffset != first.BaseOffset {
		t.Fatalf("retried batch: %+v, want success at offset %d", dup, first.BaseOffset)
	}
	if gap := produce(mk(7)); gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %+v", gap)
	}
	// A newer epoch of the same id starts over at sequence 0; the older
	// epoch is then fenced.
	next := produce(buildBatch(t, 1, &batch.Producer{ID: pid.ProducerID, Epoch: 1, BaseSequence: 0}))
	if next.ErrorCode != 0 {
		t.Fatalf("epoch 1: %+v", next)
	}
	if old := produce(mk(2)); old.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %+v", old)
	}
	if unknown := produce(buildBatch(t, 1, &batch.Producer{ID: 1 << 40, BaseSequence: 0})); unknown.ErrorCode != kerr.UnknownProducerID.Code {
		t.Fatalf("unallocated producer id: %+v", unknown)
	}
	big, err := batch.Build([]batch.Record{{Value: make([]byte, 2<<20)}}, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := produce(big); p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("2 MiB batch: %+v", p)
	}
	info, _ := n.b.DescribeTopic("val")
	if hw := info.Partitions[0].HighWatermark; hw != 6 {
		t.Fatalf("high watermark %d, want 6", hw)
	}
}

// TestFetchVersions reads the same batches at every served Fetch version,
// decoding the hand-written responses with kmsg.
func TestFetchVersions(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("fv", 1)
	r := n.raw()
	for range 3 {
		r.do(produceReq(9, -1, "fv", 0, buildBatch(t, 4, nil)))
	}
	id := n.topicID("fv")
	fetch := func(v int16, offset int64) *kmsg.FetchRequest {
		req := fetchReq(v, "fv", 0, offset, 0)
		if v >= 13 { // by topic id only (KIP-516)
			req.Topics[0].Topic, req.Topics[0].TopicID = "", id
		}
		return req
	}
	for v := apis[1].min; v <= apis[1].max; v++ {
		resp := r.do(fetch(v, 4)).(*kmsg.FetchResponse)
		if v >= 13 && resp.Topics[0].TopicID != id {
			t.Fatalf("v%d: answered topic id %x, want %x", v, resp.Topics[0].TopicID, id)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 12 || p.LastStableOffset != 12 {
			t.Fatalf("v%d: %+v", v, p)
		}
		if v >= 5 && p.LogStartOffset != 0 {
			t.Fatalf("v%d: log start %d", v, p.LogStartOffset)
		}
		var offs []int64
		for len(p.RecordBatches) > 0 {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(p.RecordBatches); err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			offs = append(offs, rb.FirstOffset)
			p.RecordBatches = p.RecordBatches[12+rb.Length:]
		}
		if len(offs) != 2 || offs[0] != 4 || offs[1] != 8 {
			t.Fatalf("v%d: batches at %v, want [4 8]", v, offs)
		}
		past := r.do(fetch(v, 13)).(*kmsg.FetchResponse)
		if c := past.Topics[0].Partitions[0].ErrorCode; c != kerr.OffsetOutOfRange.Code {
			t.Fatalf("v%d past the end: error %d", v, c)
		}
	}
}

// TestFetchNoZstdBelowV10: a client too old for zstd gets
// UNSUPPORTED_COMPRESSION_TYPE rather than bytes it cannot decode.
func TestFetchNoZstdBelowV10(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("z", 1)
	cl := n.client(kgo.DefaultProduceTopic("z"), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	// Compressible records, or franz-go sends them uncompressed.
	var recs []*kgo.Record
	for range 100 {
		recs = append(recs, &kgo.Record{Value: bytes.Repeat([]byte("z"), 100)})
	}
	if err := cl.ProduceSync(testCtx(t, 10*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := n.raw()
	old := r.do(fetchReq(9, "z", 0, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if old.ErrorCode != kerr.UnsupportedCompressionType.Code || len(old.RecordBatches) != 0 {
		t.Fatalf("fetch v9 of zstd: %+v", old)
	}
	cur := r.do(fetchReq(10, "z", 0, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if cur.ErrorCode != 0 || len(cur.RecordBatches) == 0 {
		t.Fatalf("fetch v10 of zstd: %+v", cur)
	}
	// An uncompressed batch, then zstd ones: v9 gets the first only.
	n.createTopic("z2", 1)
	r.do(produceReq(9, -1, "z2", 0, buildBatch(t, 2, nil)))
	if err := cl.ProduceSync(testCtx(t, 10*time.Second), withTopic(recs, "z2")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	mixed := r.do(fetchReq(9, "z2", 0, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	var rb kmsg.RecordBatch
	if mixed.ErrorCode != 0 || rb.ReadFrom(mixed.RecordBatches) != nil || int(12+rb.Length) != len(mixed.RecordBatches) || rb.Attributes&7 != 0 {
		t.Fatalf("fetch v9 of plain then zstd: error %d, %d bytes, first batch %+v", mixed.ErrorCode, len(mixed.RecordBatches), rb)
	}
}

// TestFetchLongPoll: a fetch at the end of the log waits for a produce on
// another connection and answers with it.
func TestFetchLongPoll(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("lp", 1)
	r := n.raw()
	req := fetchReq(12, "lp", 0, 0, 20000)
	corr := r.send(req)
	n.raw().do(produceReq(9, -1, "lp", 0, buildBatch(t, 1, nil)))
	p := r.recv(req, corr).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != 1 {
		t.Fatalf("long-poll answer: %+v", p)
	}
	// Nothing arrives: the answer is empty once MaxWait passes.
	empty := r.do(fetchReq(12, "lp", 0, 1, 10)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if empty.ErrorCode != 0 || len(empty.RecordBatches) != 0 {
		t.Fatalf("empty long-poll: %+v", empty)
	}
}

// TestFetchMinBytes: with some data but less than MinBytes, the fetch waits
// for more until MaxWait, then answers with what there is.
func TestFetchMinBytes(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("mb", 1)
	r := n.raw()
	r.do(produceReq(9, -1, "mb", 0, buildBatch(t, 1, nil)))
	req := fetchReq(11, "mb", 0, 0, 100)
	req.MinBytes = 1 << 20
	p := r.do(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch under MinBytes: %+v", p)
	}
}

func withTopic(recs []*kgo.Record, topic string) []*kgo.Record {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		out[i] = &kgo.Record{Topic: topic, Value: r.Value}
	}
	return out
}

func TestCreateTopicsRefusals(t *testing.T) {
	n := startNode(t, "")
	r := n.raw()
	bad := "compaction"
	unknown := "1"
	for _, tc := range []struct {
		name       string
		partitions int32
		rf         int16
		cfg        string
		val        *string
		code       int16
	}{
		{"bad/name", 1, 1, "", nil, kerr.InvalidTopicException.Code},
		{"zero", 0, 1, "", nil, kerr.InvalidPartitions.Code},
		{"rf2", 1, 2, "", nil, kerr.InvalidReplicationFactor.Code},
		{"compact", 1, 1, "cleanup.policy", &bad, kerr.InvalidConfig.Code},
		{"unknown", 1, 1, "segment.jitter.ms", &unknown, kerr.InvalidConfig.Code},
		{"ok", -1, -1, "", nil, 0},
	} {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(5)
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = tc.name, tc.partitions, tc.rf
		if tc.cfg != "" {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = tc.cfg, tc.val
			ct.Configs = append(ct.Configs, c)
		}
		req.Topics = append(req.Topics, ct)
		got := r.do(req).(*kmsg.CreateTopicsResponse).Topics[0]
		if got.ErrorCode != tc.code {
			t.Errorf("%s: error %d, want %d (%v)", tc.name, got.ErrorCode, tc.code, got.ErrorMessage)
		}
	}
	if ts := n.b.ListTopics(""); len(ts) != 1 || ts[0].Name != "ok" || ts[0].Partitions != 1 {
		t.Fatalf("topics: %+v", ts)
	}
}
