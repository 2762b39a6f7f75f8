package api_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// buildBatch is a client-built batch of values, timestamped ts.
func buildBatch(t *testing.T, opts batch.Options, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Timestamp: 1_700_000_000_000 + int64(i), Value: []byte(v)}
	}
	raw, err := batch.Build(recs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func batchReq(id uint64, topic string, batches ...*sluicev1.RecordBatch) *sluicev1.PublishRequest {
	return &sluicev1.PublishRequest{Id: id, Destination: &sluicev1.PublishRequest_Topic{Topic: topic}, Batches: batches}
}

func part(p int32) *int32 { return &p }

// recordResults is resp's answer per record: its results, or for a request of
// batches each batch's answer spread over its records (record i at the base
// offset + i), as the client's Publisher spreads it.
func recordResults(resp *sluicev1.PublishResponse) []*sluicev1.PublishResult {
	if len(resp.GetBatchResults()) == 0 {
		return resp.GetResults()
	}
	var out []*sluicev1.PublishResult
	for _, b := range resp.GetBatchResults() {
		for i := range int64(b.GetRecords()) {
			if b.GetError() != nil {
				out = append(out, &sluicev1.PublishResult{Error: b.GetError()})
				continue
			}
			out = append(out, &sluicev1.PublishResult{Record: &sluicev1.ProduceResult{Partition: b.GetPartition(), Offset: b.GetBaseOffset() + i}})
		}
	}
	return out
}

// Record batches on the Publish stream are stored as they came, in stream
// order among record requests, each record answered with its own offset;
// a batch refused refuses its records only, a request malformed as a whole
// is refused whole, and the stream goes on.
func TestPublishRecordBatches(t *testing.T) {
	b, c := streamAPI(t, 0)
	s := c.Publish(t.Context())
	good := func(vs ...string) *sluicev1.RecordBatch {
		return &sluicev1.RecordBatch{Data: buildBatch(t, batch.Options{}, vs...)}
	}
	damaged := good("x1", "x2")
	damaged.Data = bytes.Clone(damaged.Data)
	damaged.Data[len(damaged.Data)-1] ^= 0xff // the CRC no longer holds
	txn := &sluicev1.RecordBatch{Data: buildBatch(t, batch.Options{Producer: &batch.Producer{ID: 7, Epoch: 0, BaseSequence: 0}, Transactional: true}, "t1")}
	marker, err := batch.BuildMarker(7, 0, true, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	gap := buildBatch(t, batch.Options{}, "g1", "g2")
	gap = bytes.Clone(gap)
	gap[26] = 5 // last offset delta 5 for 2 records (the header, not the CRC, is refused)
	mixed := batchReq(9, "t", good("m"))
	mixed.Records = []*sluicev1.ProduceRecord{{Value: []byte("r")}}
	type want struct{ code, reason string } // "" code: stored
	ok := want{}
	bad := want{"invalid_argument", "INVALID_ARGUMENT"}
	cases := []struct {
		req     *sluicev1.PublishRequest
		whole   *want
		entries []want
		stored  []string // the values it adds to the log, in order
	}{
		{req: batchReq(1, "t", good("a", "b", "c")), entries: []want{ok, ok, ok}, stored: []string{"a", "b", "c"}},
		{req: topicReq(2, "t", []byte("d"), []byte("e")), entries: []want{ok, ok}, stored: []string{"d", "e"}},
		{req: batchReq(3, "t", good("f"), damaged, &sluicev1.RecordBatch{Partition: part(0), Data: buildBatch(t, batch.Options{}, "g", "h")}),
			entries: []want{ok, bad, bad, ok, ok}, stored: []string{"f", "g", "h"}},
		{req: batchReq(4, "t", txn), entries: []want{bad}},
		{req: batchReq(5, "t", &sluicev1.RecordBatch{Data: marker}), entries: []want{bad}},
		{req: batchReq(6, "t", &sluicev1.RecordBatch{Partition: part(3), Data: buildBatch(t, batch.Options{}, "p")}),
			entries: []want{{"not_found", "PARTITION_NOT_FOUND"}}},
		{req: batchReq(7, "t", &sluicev1.RecordBatch{Data: []byte("short")}), whole: &bad},
		{req: batchReq(8, "t", &sluicev1.RecordBatch{Data: gap}), whole: &bad},
		{req: mixed, whole: &bad},
		{req: batchReq(10, "nope", good("n")), entries: []want{{"not_found", "TOPIC_NOT_FOUND"}}},
		{req: &sluicev1.PublishRequest{Id: 11, Destination: &sluicev1.PublishRequest_Queue{Queue: "q"},
			Batches: []*sluicev1.RecordBatch{good("q")}}, whole: &bad},
		{req: batchReq(12, "t", good("still"), good("open")), entries: []want{ok, ok}, stored: []string{"still", "open"}},
	}
	for _, tc := range cases {
		if err := s.Send(tc.req); err != nil {
			t.Fatal(err)
		}
	}
	var stored []string
	next := int64(0)
	for _, tc := range cases {
		resp, err := s.Receive()
		if err != nil {
			t.Fatalf("request %d: %v", tc.req.GetId(), err)
		}
		id := resp.GetId()
		if id != tc.req.GetId() {
			t.Fatalf("answer for %d, want %d", id, tc.req.GetId())
		}
		if tc.whole != nil {
			if e := resp.GetError(); e.GetCode() != tc.whole.code || e.GetInfo().GetReason() != tc.whole.reason ||
				len(resp.GetResults())+len(resp.GetBatchResults()) != 0 {
				t.Errorf("request %d: %v, want the whole request refused %v", id, resp, *tc.whole)
			}
			continue
		}
		if batches := len(tc.req.GetBatches()); len(resp.GetBatchResults()) != batches || batches > 0 && len(resp.GetResults()) > 0 {
			t.Fatalf("request %d: %d batch results and %d results for %d batches", id, len(resp.GetBatchResults()), len(resp.GetResults()), batches)
		}
		results := recordResults(resp)
		if len(results) != len(tc.entries) {
			t.Fatalf("request %d: %d results, want %d", id, len(results), len(tc.entries))
		}
		for j, w := range tc.entries {
			r := results[j]
			got := want{r.GetError().GetCode(), r.GetError().GetInfo().GetReason()}
			if got != w || (r.GetRecord() != nil) != (w.code == "") {
				t.Errorf("request %d entry %d: %v, want %v", id, j, r, w)
				continue
			}
			if w.code == "" {
				if off := r.GetRecord().GetOffset(); off != next {
					t.Errorf("request %d entry %d: offset %d, want %d (the stream's order)", id, j, off, next)
				}
				next++
			}
		}
		stored = append(stored, tc.stored...)
	}
	_ = s.CloseRequest()
	res, err := b.Fetch(t.Context(), "t", 0, 0, broker.FetchOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for data := res.Batches; len(data) > 0; {
		n, err := batch.FrameSize(data)
		if err != nil {
			t.Fatal(err)
		}
		for r, err := range batch.Records(data[:n]) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(r.Value))
		}
		data = data[n:]
	}
	if fmt.Sprint(got) != fmt.Sprint(stored) {
		t.Errorf("log holds %q, want %q", got, stored)
	}
}
