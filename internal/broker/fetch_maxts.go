package broker

import (
	"errors"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
)

// maxTimestamp finds the record with the largest timestamp (the first of
// them on a tie), as Kafka's ListOffsets -3 does. The log keeps no index of
// the largest timestamp, so it walks the batch headers from the log start
// (one header read per batch, no record data) and then reads the one batch
// that holds the maximum to find the record. An empty log answers offset
// -1, timestamp -1, as Kafka does.
func maxTimestamp(p *partitionRT) (OffsetAt, error) {
	best := OffsetAt{Offset: -1, Timestamp: -1}
	var bestHeader batch.Header
	hw := p.log.HighWatermark()
	for off := p.log.LogStartOffset(); off < hw; {
		h, err := p.log.HeaderAt(off)
		if errors.Is(err, storage.ErrOffsetOutOfRange) {
			break
		}
		if err != nil {
			return OffsetAt{}, mapStorageErr(err)
		}
		if h.MaxTimestamp > best.Timestamp {
			best, bestHeader = OffsetAt{Offset: h.BaseOffset, Timestamp: h.MaxTimestamp}, h
		}
		off = max(h.LastOffset()+1, off+1)
	}
	if best.Offset < 0 {
		return best, nil
	}
	// Within the batch: the record whose timestamp is the batch's maximum.
	data, err := p.log.Read(bestHeader.BaseOffset, 1)
	if err != nil || len(data) == 0 {
		return best, nil // the batch's base offset is still an answer
	}
	n, err := batch.FrameSize(data)
	if err != nil {
		return best, nil
	}
	for r, err := range batch.Records(data[:n]) {
		if err != nil {
			break
		}
		if r.Timestamp == best.Timestamp {
			best.Offset = r.Offset
			break
		}
	}
	return best, nil
}
