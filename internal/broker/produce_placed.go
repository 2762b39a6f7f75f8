package broker

import (
	"context"
	"errors"

	"github.com/sluice-mq/sluice/internal/storage"
)

// PlacedProduce is a Produce whose records have their offsets, in the
// order of the PlaceProduce calls, and are on their way to the disk; Wait
// answers once they are durable.
type PlacedProduce struct {
	b      *Broker
	out    []ProduceResult
	byPart map[int32][]int
	parts  map[int32]placedPart
	errs   map[int32]error // partitions that failed to place

	done bool // answered already: res, err
	res  []ProduceResult
	err  error
}

// placedPart is one partition's share of a PlacedProduce.
type placedPart struct {
	p      *partitionRT
	pb     *partBatches
	placed storage.Placed
}

// PlaceProduce is Produce split in two, for a caller that pipelines: it
// routes and checks the records, builds each partition's batches and
// queues them for the partition's next group commit, then returns without
// waiting for the disk; Wait waits. Calls made one after another by one
// goroutine get offsets in that order on every partition, so a stream that
// places its next requests while the earlier ones are being synced keeps
// its order in the log, and one fsync carries them all.
//
// A refusal before anything is written (the topic, a record too large or
// without the key a compacted topic needs, an unknown partition, a full
// disk) is returned here, as Produce returns it; a partition that fails
// once placing began is reported by Wait, with the others' results lost as
// in Produce. In a cluster and for an idempotent produce, whose appends
// must be proposed or checked in turn, PlaceProduce does the whole Produce
// and Wait only answers it.
func (b *Broker) PlaceProduce(ctx context.Context, topic string, recs []ProduceRecord, opts ProduceOptions) (*PlacedProduce, error) {
	if b.cluster != nil || opts.Idempotence != nil {
		res, err := b.Produce(ctx, topic, recs, opts)
		if err != nil {
			return nil, err
		}
		return &PlacedProduce{done: true, res: res}, nil
	}
	s, parts, byPart, now, err := b.routeProduce(topic, recs)
	if err != nil {
		return nil, err
	}
	pp := &PlacedProduce{b: b, out: make([]ProduceResult, len(recs)), byPart: byPart,
		parts: make(map[int32]placedPart, len(byPart)), errs: map[int32]error{}}
	for p, idx := range byPart {
		pb, checked, err := buildPartition(parts[p], s, recs, idx, now, nil, pp.out)
		if err != nil {
			pp.errs[p] = err
			continue
		}
		placed, err := parts[p].log.PlaceChecked(LeaderEpoch, checked)
		if err != nil {
			pp.errs[p] = b.disk.Note(mapStorageErr(err)) // as appendBatches maps it
			continue
		}
		pp.parts[p] = placedPart{p: parts[p], pb: pb, placed: placed}
	}
	return pp, nil
}

// Wait returns where each record went, in input order, once every
// partition's batches are durable; or the error, as Produce would have
// returned it. If ctx ends first the outcome is unknown (ctx.Err()).
func (pp *PlacedProduce) Wait(ctx context.Context) ([]ProduceResult, error) {
	if pp.done {
		return pp.res, pp.err
	}
	var errs []error
	for p := range pp.byPart {
		if err, ok := pp.errs[p]; ok {
			errs = append(errs, err)
			continue
		}
		part := pp.parts[p]
		bases, err := part.placed.Wait(ctx)
		if err != nil {
			errs = append(errs, pp.b.disk.Note(mapStorageErr(err)))
			continue
		}
		part.pb.setOffsets(bases)
		part.p.owner.notifySubs()
	}
	pp.done = true
	if err := errors.Join(errs...); err != nil {
		pp.err = err
		return nil, err
	}
	pp.res = pp.out
	return pp.res, nil
}
