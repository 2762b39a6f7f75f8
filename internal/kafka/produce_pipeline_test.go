package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// TestPipelinedIdempotentProduces writes a burst of idempotent produce
// requests in one write, so the server finds them buffered together: each
// is answered, in order, as if handled alone — its own offset, a retry as
// its first offset, a sequence gap refused without failing its neighbours —
// and the log holds every accepted batch once, in sequence order.
func TestPipelinedIdempotentProduces(t *testing.T) {
	// v13 names the topic by id, which the pipeline resolves first.
	for _, v := range []int16{9, apis[0].max} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { testPipelinedIdempotentProduces(t, v) })
	}
}

func testPipelinedIdempotentProduces(t *testing.T, version int16) {
	n := startNodeSync(t, "", broker.SyncPolicy{Mode: broker.SyncAlways})
	n.createTopic("piped", 2)
	id := n.topicID("piped")
	r := n.raw()
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.SetVersion(4)
	init := r.do(ip).(*kmsg.InitProducerIDResponse)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	prod := func(seq int32) *batch.Producer {
		return &batch.Producer{ID: init.ProducerID, Epoch: init.ProducerEpoch, BaseSequence: seq}
	}
	type want struct {
		code   int16
		offset int64
	}
	var reqs []*kmsg.ProduceRequest
	var wants []want
	add := func(part int32, b []byte, acks int16, w want) {
		req := produceReq(version, acks, "piped", part, b)
		if version >= produceTopicIDVersion {
			req.Topics[0].Topic, req.Topics[0].TopicID = "", id
		}
		reqs = append(reqs, req)
		wants = append(wants, w)
	}
	first := buildBatch(t, 2, prod(0))
	add(0, first, -1, want{0, 0})
	add(0, buildBatch(t, 2, prod(2)), -1, want{0, 2})
	add(1, buildBatch(t, 1, prod(0)), -1, want{0, 0}) // another partition, its own sequence
	add(0, buildBatch(t, 2, prod(4)), 1, want{0, 4})
	add(0, buildBatch(t, 1, prod(10)), -1, want{kerr.OutOfOrderSequenceNumber.Code, -1})
	add(0, buildBatch(t, 1, prod(6)), -1, want{0, 6})
	add(0, first, -1, want{0, 0}) // a retry: answered with its first offset
	add(0, buildBatch(t, 3, prod(7)), -1, want{0, 7})
	// A second burst that mixes in a batch without a producer: handled one
	// request at a time, with the same answers.
	add(0, buildBatch(t, 1, prod(10)), -1, want{0, 10})
	add(0, buildBatch(t, 2, nil), -1, want{0, 11})
	add(0, buildBatch(t, 1, prod(11)), -1, want{0, 13})
	// A third burst where every batch is good: one append per partition.
	add(0, buildBatch(t, 2, prod(12)), -1, want{0, 14})
	add(1, buildBatch(t, 1, prod(1)), -1, want{0, 1})
	add(0, buildBatch(t, 1, prod(14)), 1, want{0, 16})
	add(0, buildBatch(t, 3, prod(15)), -1, want{0, 17})
	add(1, buildBatch(t, 2, prod(2)), -1, want{0, 2})

	send := func(from, to int) {
		var buf []byte
		var corrs []int32
		for _, req := range reqs[from:to] {
			r.corr++
			buf = append(buf, r.f.AppendRequest(nil, req, r.corr)...)
			corrs = append(corrs, r.corr)
		}
		if _, err := r.c.Write(buf); err != nil {
			t.Fatal(err)
		}
		for i, req := range reqs[from:to] {
			resp := r.recv(req, corrs[i]).(*kmsg.ProduceResponse)
			p := resp.Topics[0].Partitions[0]
			w := wants[from+i]
			if p.ErrorCode != w.code || (w.code == 0 && p.BaseOffset != w.offset) {
				t.Errorf("request %d: code %d offset %d, want %d %d", from+i, p.ErrorCode, p.BaseOffset, w.code, w.offset)
			}
		}
	}
	send(0, 8)
	send(8, 11)
	send(11, len(reqs))

	info, err := n.b.DescribeTopic("piped")
	if err != nil {
		t.Fatal(err)
	}
	if hw0, hw1 := info.Partitions[0].HighWatermark, info.Partitions[1].HighWatermark; hw0 != 20 || hw1 != 4 {
		t.Fatalf("high watermarks %d and %d, want 20 and 4", hw0, hw1)
	}
}
