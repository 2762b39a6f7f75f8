package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Limits of Fetch, from topic.proto.
const (
	defaultFetchRecords = 500
	defaultFetchBytes   = 1 << 20
	maxFetchWait        = 30 * time.Second
)

func (t *topicService) Produce(ctx context.Context, req *connect.Request[sluicev1.ProduceRequest]) (*connect.Response[sluicev1.ProduceResponse], error) {
	name := req.Msg.GetTopic()
	if len(req.Msg.GetRecords()) == 0 {
		return nil, invalidArg(ReasonInvalidArgument, "records", "records must not be empty", tmeta(name))
	}
	recs := make([]broker.ProduceRecord, len(req.Msg.GetRecords()))
	for i, r := range req.Msg.GetRecords() {
		var err error
		if recs[i], err = produceRecord(i, r, name); err != nil {
			return nil, err
		}
	}
	var opts broker.ProduceOptions
	if idem := req.Msg.GetIdempotence(); idem != nil {
		opts.Idempotence = &broker.Idempotence{BaseSequence: idem.GetBaseSequence(),
			Producer: broker.ProducerID{ID: idem.GetProducerId(), Epoch: int16(idem.GetProducerEpoch())}}
	}
	res, err := t.b.Produce(ctx, name, recs, opts)
	if err != nil {
		return nil, t.toConnect(err, tmeta(name))
	}
	out := &sluicev1.ProduceResponse{Results: make([]*sluicev1.ProduceResult, len(res))}
	for i, r := range res {
		out.Results[i] = &sluicev1.ProduceResult{Partition: r.Partition, Offset: r.Offset, Timestamp: ts(r.Timestamp)}
	}
	return connect.NewResponse(out), nil
}

// produceRecord is record i of a request for topic name, as the broker takes it.
func produceRecord(i int, r *sluicev1.ProduceRecord, name string) (broker.ProduceRecord, error) {
	rec := broker.ProduceRecord{Key: r.GetKey(), Value: r.GetValue()}
	if r.GetValue() == nil {
		rec.Value = []byte{} // proto3 cannot say null; an unset value is empty
	}
	for _, h := range r.GetHeaders() {
		rec.Headers = append(rec.Headers, batch.RecordHeader{Key: h.GetKey(), Value: h.GetValue()})
	}
	if r.GetTimestamp() != nil {
		rec.Timestamp = r.GetTimestamp().AsTime()
	}
	switch p := r.GetPartition(); {
	case r.Partition == nil || p == -1: // by key
	case p < -1:
		return rec, invalidArg(ReasonInvalidArgument, "partition",
			fmt.Sprintf("record %d: partition %d: want -1 (by key) or a partition number", i, p), tmeta(name))
	default:
		rec.Partition = &p
	}
	return rec, nil
}

// Fetch reads each requested partition once; if nothing at all came back
// and the caller allows a wait, it long-polls for data on any of them and
// reads again.
func (t *topicService) Fetch(ctx context.Context, req *connect.Request[sluicev1.FetchRequest]) (*connect.Response[sluicev1.FetchResponse], error) {
	m := req.Msg
	name := m.GetTopic()
	wait, err := fromDur(m.GetMaxWait(), "max_wait")
	if err != nil {
		return nil, err
	}
	if wait < 0 || wait > maxFetchWait {
		return nil, invalidArg(ReasonInvalidArgument, "max_wait", fmt.Sprintf("max_wait %v: want 0 to %v", wait, maxFetchWait), tmeta(name))
	}
	if len(m.GetPartitions()) == 0 {
		return nil, invalidArg(ReasonInvalidArgument, "partitions", "name at least one partition and offset", tmeta(name))
	}
	if _, err := t.b.PartitionCount(name); err != nil {
		return nil, t.toConnect(err, tmeta(name))
	}
	out, n := t.fetchOnce(m)
	if n == 0 && markForward(ctx, fetchLeader(out)) {
		return connect.NewResponse(out), nil // every partition is led elsewhere, by one node
	}
	if t.fanOut(ctx) {
		if remote := ledElsewhere(out); len(remote) > 0 {
			return t.fetchAcross(ctx, req.Header(), m, out, n, remote, wait)
		}
	}
	if n == 0 && wait > 0 && !advanced(out, m) {
		pollCtx, cancel := t.untilDrain(ctx)
		defer cancel()
		pos := make([]broker.FetchPosition, len(m.GetPartitions()))
		for i, p := range m.GetPartitions() {
			// Wait for the log to grow past what was read, not past the
			// offset asked: records of an open transaction lie between them
			// (the fetch stops at the last stable offset), and waiting for
			// the offset would answer at once, again and again.
			off := max(p.GetOffset(), out.Partitions[i].GetHighWatermark())
			pos[i] = broker.FetchPosition{Topic: name, Partition: p.GetPartition(), Offset: off}
		}
		if t.b.WaitForData(pollCtx, pos, wait) {
			out, _ = t.fetchOnce(m)
		}
	}
	return connect.NewResponse(out), nil
}

// fetchLeader is the node leading every partition of a Fetch answer that failed with
// NOT_LEADER on each (0: any other answer), for forwarding the whole call there.
func fetchLeader(out *sluicev1.FetchResponse) int32 {
	var leader int32
	for _, p := range out.GetPartitions() {
		l := leaderOf(p.GetError())
		if l == 0 || (leader != 0 && l != leader) {
			return 0
		}
		leader = l
	}
	return leader
}

// fetchOnce reads every partition without waiting; per-partition failures
// are reported in the partition's answer, as the schema asks.
func (t *topicService) fetchOnce(m *sluicev1.FetchRequest) (*sluicev1.FetchResponse, int) {
	name := m.GetTopic()
	maxRecords, maxBytes := int(m.GetMaxRecords()), int(m.GetMaxBytes())
	if maxRecords <= 0 {
		maxRecords = defaultFetchRecords
	}
	if maxBytes <= 0 {
		maxBytes = defaultFetchBytes
	}
	out := &sluicev1.FetchResponse{}
	total := 0
	for _, p := range m.GetPartitions() {
		pr := &sluicev1.PartitionRecords{Partition: p.GetPartition(), NextOffset: p.GetOffset()}
		out.Partitions = append(out.Partitions, pr)
		if total >= maxRecords || maxBytes <= 0 {
			continue
		}
		res, err := t.b.Fetch(context.Background(), name, p.GetPartition(), p.GetOffset(), broker.FetchOptions{MaxBytes: maxBytes})
		pr.HighWatermark, pr.LogStartOffset = res.HighWatermark, res.LogStartOffset
		if err == nil {
			want := maxRecords - total
			pr.Records, pr.NextOffset, err = records(res.Batches, p.GetPartition(), p.GetOffset(), want)
			if len(pr.Records) < want && res.Next > pr.NextOffset {
				// Every record read was returned: go on past the batches the
				// broker left out (transaction markers, aborted records).
				pr.NextOffset = res.Next
			}
		}
		if err != nil {
			pr.Error = errorInfo(err, pmeta(name, p.GetPartition()))
			if errors.Is(err, broker.ErrOffsetOutOfRange) {
				start, _ := t.b.ListOffsets(name, p.GetPartition(), broker.OffsetEarliest)
				end, _ := t.b.ListOffsets(name, p.GetPartition(), broker.OffsetLatest)
				pr.LogStartOffset, pr.HighWatermark = start.Offset, end.Offset
				pr.Error.Metadata["log_start_offset"] = fmt.Sprint(start.Offset)
				pr.Error.Metadata["high_watermark"] = fmt.Sprint(end.Offset)
			}
			continue
		}
		total += len(pr.Records)
		maxBytes -= len(res.Batches)
	}
	return out, total
}

// advanced reports whether a fetch moved some partition's next offset on
// without returning records (it skipped transaction markers or aborted
// records): the caller should have the new position at once.
func advanced(out *sluicev1.FetchResponse, m *sluicev1.FetchRequest) bool {
	for i, p := range m.GetPartitions() {
		if out.Partitions[i].GetNextOffset() > p.GetOffset() {
			return true
		}
	}
	return false
}
