package client

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-mq/sluice/internal/batch"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// asRecordBatch turns a request of unkeyed records into one batch that
// decodes to the same records (a missing timestamp is now's, a missing
// value empty), and leaves a request with a key or a partition as it is.
func TestAsRecordBatch(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	topic := &sluicev1.PublishRequest_Topic{Topic: "t"}
	recs := []*ProduceRecord{
		{Value: []byte("a"), Headers: []*Header{{Key: "h", Value: []byte("v")}}},
		{Timestamp: timestamppb.New(now.Add(time.Second))},
		{Value: []byte("c"), Partition: ptr(int32(-1))},
	}
	req := asRecordBatch(&sluicev1.PublishRequest{Id: 9, Destination: topic, Records: recs}, now)
	if req.GetId() != 9 || req.GetTopic() != "t" || len(req.GetRecords()) != 0 || len(req.GetBatches()) != 1 || req.GetBatches()[0].Partition != nil {
		t.Fatalf("request: %v, want one batch for any partition", req)
	}
	var got []batch.Record
	for r, err := range batch.Records(req.GetBatches()[0].GetData()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	want := []batch.Record{
		{Offset: 0, Timestamp: now.UnixMilli(), Value: []byte("a"), Headers: []batch.RecordHeader{{Key: "h", Value: []byte("v")}}},
		{Offset: 1, Timestamp: now.UnixMilli() + 1000, Value: []byte{}},
		{Offset: 2, Timestamp: now.UnixMilli(), Value: []byte("c")},
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp || g.Key != nil || string(g.Value) != string(w.Value) || g.Value == nil ||
			len(g.Headers) != len(w.Headers) || (len(w.Headers) == 1 && (g.Headers[0].Key != "h" || string(g.Headers[0].Value) != "v")) {
			t.Errorf("record %d: %+v, want %+v", i, g, w)
		}
	}
	for _, keep := range [][]*ProduceRecord{
		{{Value: []byte("a")}, {Key: []byte("k"), Value: []byte("b")}},
		{{Value: []byte("a"), Partition: ptr(int32(2))}},
	} {
		in := &sluicev1.PublishRequest{Id: 1, Destination: topic, Records: keep}
		if out := asRecordBatch(in, now); out != in {
			t.Errorf("a request with a key or partition was rewritten: %v", out)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// An answer of batch results resolves each batch's records in order, record
// i at the base offset + i, a refused batch's records with its error; an
// answer for another number of records fails every entry.
func TestResolveRecordBatches(t *testing.T) {
	futures := func(n int) []*PublishFuture {
		fs := make([]*PublishFuture, n)
		for i := range fs {
			fs[i] = &PublishFuture{done: make(chan struct{})}
		}
		return fs
	}
	fs := futures(5)
	resolveBatch(fs, &sluicev1.PublishResponse{BatchResults: []*sluicev1.BatchResult{
		{Partition: 2, BaseOffset: 40, Records: 3},
		{Records: 2, Error: &sluicev1.PublishError{Code: "invalid_argument", Message: "damaged"}},
	}})
	for i, f := range fs {
		res, err := f.Wait(t.Context())
		switch {
		case i < 3 && (err != nil || res.GetRecord().GetPartition() != 2 || res.GetRecord().GetOffset() != int64(40+i)):
			t.Errorf("record %d: %v %v, want partition 2 offset %d", i, res, err, 40+i)
		case i >= 3 && err == nil:
			t.Errorf("record %d of the refused batch: %v, want its error", i, res)
		}
	}
	fs = futures(2)
	resolveBatch(fs, &sluicev1.PublishResponse{BatchResults: []*sluicev1.BatchResult{{Records: 3}}})
	for i, f := range fs {
		if _, err := f.Wait(t.Context()); err == nil {
			t.Errorf("entry %d answered by a batch of another size", i)
		}
	}
}
