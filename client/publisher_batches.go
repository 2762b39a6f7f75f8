package client

import (
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// asRecordBatch is a topic request's records as one record batch the
// client built (PublisherOptions.RecordBatches), or req unchanged when one
// of its records names a key or a partition: a batch has one partition,
// and choosing it by key here would need the topic's partition count. A
// record without a timestamp gets now's, as the server would give it at
// append; an unset value is empty, not null, as the server stores it.
func asRecordBatch(req *sluicev1.PublishRequest, now time.Time) *sluicev1.PublishRequest {
	recs := req.GetRecords()
	if len(recs) == 0 {
		return req
	}
	nowMs := now.UnixMilli()
	brs := make([]batch.Record, len(recs))
	for i, r := range recs {
		if len(r.GetKey()) > 0 || (r.Partition != nil && r.GetPartition() != -1) {
			return req
		}
		br := batch.Record{Timestamp: nowMs, Value: r.GetValue()}
		if br.Value == nil {
			br.Value = []byte{}
		}
		if r.GetTimestamp() != nil {
			br.Timestamp = r.GetTimestamp().AsTime().UnixMilli()
		}
		for _, h := range r.GetHeaders() {
			br.Headers = append(br.Headers, batch.RecordHeader{Key: h.GetKey(), Value: h.GetValue()})
		}
		brs[i] = br
	}
	raw, err := batch.Build(brs, batch.Options{})
	if err != nil {
		return req // the server refuses what Build cannot encode, record by record
	}
	return &sluicev1.PublishRequest{Id: req.GetId(), Destination: req.GetDestination(),
		Batches: []*sluicev1.RecordBatch{{Data: raw}}}
}
