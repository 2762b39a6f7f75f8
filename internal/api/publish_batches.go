package api

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/internal/batch"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Record batches on the Publish stream (stream.proto, RecordBatch): the
// client built them, so the server stores each with one check and no
// decoding of its records, as it stores a Kafka produce, and answers each
// with one BatchResult, as a Kafka produce is answered. A batch refused
// refuses all of its records, and only them.

// batchRecords is how many records a batch declares, or why its header is
// not one a client may send: it must parse, and declare 1 to
// maxPublishEntries records numbered without gaps (what a client builds;
// record i is at the batch's base offset + i). The rest of the batch is
// checked by the broker.
func batchRecords(b *sluicev1.RecordBatch) (int, error) {
	h, err := batch.ParseHeader(b.GetData())
	if err != nil {
		return 0, err
	}
	if h.RecordCount < 1 || h.RecordCount > maxPublishEntries || h.LastOffsetDelta != h.RecordCount-1 {
		return 0, fmt.Errorf("%d records with last offset delta %d: want 1 to %d records numbered from 0 without gaps",
			h.RecordCount, h.LastOffsetDelta, maxPublishEntries)
	}
	return int(h.RecordCount), nil
}

// checkBatches refuses a topic request whose batches are malformed as a
// whole, and returns their records.
func checkBatches(r *sluicev1.PublishRequest, meta map[string]string) (int, error) {
	if len(r.GetRecords()) > 0 && len(r.GetBatches()) > 0 {
		return 0, invalidArg(ReasonInvalidArgument, "batches", "a request carries records or batches, not both", meta)
	}
	n := 0
	for i, b := range r.GetBatches() {
		k, err := batchRecords(b)
		if err != nil {
			return 0, invalidArg(ReasonInvalidArgument, "batches", fmt.Sprintf("batch %d: %v", i, err), meta)
		}
		n += k
	}
	return n, nil
}

// batchRun places every batch of reqs (all for topic, each request's
// batches already checked by checkBatches) in order, and returns the waits
// that answer them once durable.
func (s *streamService) batchRun(ctx context.Context, topic string, reqs []*sluicev1.PublishRequest, resps []*sluicev1.PublishResponse) []func(context.Context) {
	var waits []func(context.Context)
	for i, r := range reqs {
		for k, b := range r.GetBatches() {
			out := resps[i].BatchResults[k]
			partition := int32(-1)
			if b.Partition != nil {
				partition = b.GetPartition()
			}
			placed, err := s.b.PlaceBatches(ctx, topic, partition, [][]byte{b.GetData()})
			if err != nil {
				out.Error = publishError(s.API, withMeta(err, tmeta(topic)))
				continue
			}
			waits = append(waits, func(ctx context.Context) {
				bases, err := placed.Wait(ctx)
				if err != nil {
					out.Error = publishError(s.API, withMeta(err, tmeta(topic)))
					return
				}
				out.Partition, out.BaseOffset = placed.Partition, bases[0]
			})
		}
	}
	return waits
}

// batchResults makes a batch request's answers, each with its records
// counted and nothing else set yet.
func batchResults(r *sluicev1.PublishRequest) []*sluicev1.BatchResult {
	out := make([]*sluicev1.BatchResult, len(r.GetBatches()))
	for k, b := range r.GetBatches() {
		n, _ := batchRecords(b) // checked
		out[k] = &sluicev1.BatchResult{Records: int32(n)}
	}
	return out
}
