package broker

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
)

// PlacedBatches is a PlaceBatches whose batches have their offsets and are
// on their way to the disk; Wait answers once they are durable.
type PlacedBatches struct {
	// Partition is where the batches went (PlaceBatches chose it for -1).
	Partition int32

	b      *Broker
	p      *partitionRT
	placed storage.Placed

	done  bool // answered already: bases, err
	bases []int64
	err   error
}

// PlaceBatches is ProduceBatches for a pipelining caller with record
// batches it built itself (the native API's Publish stream): it checks the
// batches as ProduceBatches does and queues them for the partition's next
// group commit without waiting for it; Wait waits. Calls made one after
// another by one goroutine get offsets in that order, as PlaceProduce's.
//
// partition -1 is the partition the topic's unkeyed records go to next
// (the keys in the batches do not choose it). Transactional and control
// batches are refused (ErrControlBatch, ErrInvalidArgument): a native
// client has no transaction coordinator to answer to. A batch with a
// producer id is checked and deduplicated as ProduceBatches does; such a
// call, and every call in a cluster (whose appends are proposed), does the
// whole produce here and Wait only answers it.
func (b *Broker) PlaceBatches(ctx context.Context, topic string, partition int32, raws [][]byte) (*PlacedBatches, error) {
	if err := b.disk.Admit(); err != nil {
		return nil, err
	}
	t, err := b.streams.topic(topic)
	if err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, invalid("batches", "nothing to produce")
	}
	s, parts := t.snapshot()
	if partition == -1 {
		partition = int32(b.streams.spread.Add(1) % uint32(len(parts)))
	}
	if partition < 0 || int(partition) >= len(parts) {
		return nil, fmt.Errorf("%w: %s/%d", ErrUnknownPartition, s.Name, partition)
	}
	p := parts[partition]
	if limit := t.maxMessageBytes(); limit < logMaxBatchBytes {
		for i, raw := range raws {
			if len(raw) > limit {
				return nil, fmt.Errorf("%w: batch %d is %d bytes, limit %d", ErrRecordTooLarge, i, len(raw), limit)
			}
		}
	}
	checked, err := p.log.Check(raws...)
	if err != nil {
		return nil, batchErr(err)
	}
	idempotent := false
	for i := range checked.Len() {
		h, _ := batch.ParseHeader(checked.Batch(i)) // checked: it parses
		switch {
		case h.Control():
			return nil, fmt.Errorf("batch %d: %w", i, ErrControlBatch)
		case h.Transactional():
			return nil, invalid("batches", "batch %d is transactional: transactions are Kafka's (use a Kafka client)", i)
		case h.ProducerID >= 0:
			idempotent = true
		}
	}
	if t.compacted() {
		if err := checkKeys(checked); err != nil {
			return nil, err
		}
	}
	pb := &PlacedBatches{Partition: partition, b: b, p: p}
	if idempotent || b.cluster != nil {
		res, err := b.appendBatches(ctx, p, checked)
		if err != nil {
			return nil, err
		}
		pb.done, pb.bases = true, res.BaseOffsets
		return pb, nil
	}
	if pb.placed, err = p.log.PlaceChecked(LeaderEpoch, checked); err != nil {
		return nil, b.disk.Note(mapStorageErr(err))
	}
	return pb, nil
}

// Wait returns each batch's base offset, in input order, once they are all
// durable; or the error, as ProduceBatches would have returned it. If ctx
// ends first the outcome is unknown (ctx.Err()).
func (pb *PlacedBatches) Wait(ctx context.Context) ([]int64, error) {
	if pb.done {
		return pb.bases, pb.err
	}
	bases, err := pb.placed.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // not answered: the append may still complete
		}
		err = pb.b.disk.Note(mapStorageErr(err))
	} else {
		pb.p.owner.notifySubs()
	}
	pb.done, pb.bases, pb.err = true, bases, err
	return bases, err
}
