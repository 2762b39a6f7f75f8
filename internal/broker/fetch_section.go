package broker

import (
	"errors"

	"github.com/sluice-mq/sluice/internal/batch"
)

// ErrUnsupportedCompression: FetchSection with NoZstd found a zstd batch
// at the requested offset, which a reader that cannot decode zstd can never
// get past (Kafka's UNSUPPORTED_COMPRESSION_TYPE). The SectionResult
// returned with it still carries the partition's state.
var ErrUnsupportedCompression = errors.New("the batch at this offset is zstd-compressed, which the reader cannot decode")

// SectionOptions bound a FetchSection.
type SectionOptions struct {
	// MaxBytes: about this many bytes of whole batches; at least one
	// batch (KIP-74). Default 1 MiB.
	MaxBytes int
	// NoZstd ends the section before the first zstd-compressed batch, for
	// a reader too old to decode zstd (a Kafka Fetch before v10, KIP-110).
	NoZstd bool
	// ReadCommitted ends the section at the last stable offset and lists
	// the aborted transactions in it (Kafka's isolation level 1).
	ReadCommitted bool
}

// SectionResult is what FetchSection found.
type SectionResult struct {
	PartitionState
	// Section holds whole batches from the requested offset, for
	// Section.WriteTo (sendfile). Length 0: nothing at that offset yet.
	Section Section
	// Aborted, with ReadCommitted, are the aborted transactions with
	// records from the requested offset to the last stable offset.
	Aborted []AbortedTxn
	// GapEnd, when above the requested offset (Section is then empty), ends a
	// quarantined range the requested offset lies in (damaged batches, never served):
	// the reader steps past it to GapEnd. Without it a Kafka consumer at the end of such
	// a range, below the high watermark, fetched nothing forever. 0 (no gap) is never
	// above an offset, so a reader needs no other flag (a flag-less "last offset" of 0
	// once made every fetch at offset 0 of an empty log answer an empty batch).
	GapEnd int64
}

// FetchSection is Fetch without the copy and without the wait: it says
// where in a segment file the batches are, so the Kafka front-end can send
// them with sendfile. If retention deletes the segment before WriteTo, the
// write fails and the client fetches again. Use WaitForData to long-poll.
//
// The batch headers are read by storage and decoded by internal/batch;
// a front-end that must leave some batches out (NoZstd) says so here
// instead of reading the segment itself.
func (b *Broker) FetchSection(topic string, partition int32, offset int64, opts SectionOptions) (SectionResult, error) {
	res, err := b.fetchSection(topic, partition, offset, opts)
	if err == nil && res.Section.Length == 0 && offset < res.HighWatermark {
		if _, p, perr := b.streams.partition(topic, partition); perr == nil {
			if last, ok := p.log.QuarantinedThrough(offset); ok {
				res.GapEnd = min(last+1, res.HighWatermark)
			}
		}
	}
	return res, err
}

func (b *Broker) fetchSection(topic string, partition int32, offset int64, opts SectionOptions) (SectionResult, error) {
	_, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return SectionResult{}, err
	}
	if err := b.checkLeader(p); err != nil {
		return SectionResult{}, err
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	st := partitionState(p)
	if opts.ReadCommitted {
		return readCommittedSection(p, st, offset, opts)
	}
	if !opts.NoZstd {
		sec, err := p.log.ReadSection(offset, opts.MaxBytes)
		if err != nil {
			return SectionResult{}, mapStorageErr(err)
		}
		return SectionResult{PartitionState: st, Section: sec}, nil
	}
	sec, stopped, err := p.log.ReadSectionWhile(offset, opts.MaxBytes, notZstd)
	if err != nil {
		return SectionResult{}, mapStorageErr(err)
	}
	if stopped && sec.Length == 0 {
		return SectionResult{PartitionState: st}, ErrUnsupportedCompression
	}
	return SectionResult{PartitionState: st, Section: sec}, nil
}

func notZstd(h batch.Header) bool { return h.Compression() != batch.CompressionZstd }
