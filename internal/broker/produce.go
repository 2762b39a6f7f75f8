package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/partitioner"
	"github.com/sluice-mq/sluice/internal/producer"
	"github.com/sluice-mq/sluice/internal/storage"
)

// ProduceRecord is one record for Produce.
type ProduceRecord struct {
	Key, Value []byte // nil is Kafka's null
	Headers    []batch.RecordHeader
	Timestamp  time.Time // zero: the broker's clock
	// Partition, when set, is where the record goes. Otherwise a keyed
	// record goes where Kafka's default partitioner puts it (murmur2 of the
	// key), and unkeyed records of one call go together to the next
	// partition in turn.
	Partition *int32
}

// ProduceOptions are the optional parts of a Produce call.
type ProduceOptions struct {
	// Idempotence makes the call one idempotent batch: every record must go
	// to the same partition, and BaseSequence numbers the first record.
	Idempotence *Idempotence
}

// Idempotence is an idempotent producer's stamp on a batch.
type Idempotence struct {
	Producer     ProducerID
	BaseSequence int32
}

// ProduceResult says where a record was stored.
type ProduceResult struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
}

// recordOverhead bounds a record's framing in a batch (length, attributes,
// deltas, key and value lengths, header count), to split batches under
// the topic's limit without encoding twice.
const recordOverhead = 32

// Produce stores records and answers, in input order, where each one went,
// once all are durable. Records for one partition are written as one batch
// (or several, each under the topic's maximum message size); partitions are
// written in parallel. A record too large for the topic fails the whole call
// with ErrRecordTooLarge before anything is written.
func (b *Broker) Produce(ctx context.Context, topic string, recs []ProduceRecord, opts ProduceOptions) ([]ProduceResult, error) {
	s, parts, byPart, now, err := b.routeProduce(topic, recs)
	if err != nil {
		return nil, err
	}
	if opts.Idempotence != nil && len(byPart) > 1 {
		return nil, invalid("records", "an idempotent produce goes to one partition, these go to %d", len(byPart))
	}
	out := make([]ProduceResult, len(recs))
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for p, idx := range byPart {
		wg.Go(func() {
			errs[p] = b.producePartition(ctx, parts[p], s, recs, idx, now, opts.Idempotence, out)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, partlyWritten(err, errs, byPart)
	}
	return out, nil
}

// partlyWritten hides the leader a NotLeaderError names when other partitions of the call
// were written here: repeated whole on that leader (the native API forwards a call that
// names one), they would be written twice. The caller still gets ErrNotLeader (retry).
func partlyWritten(err error, errs []error, byPart map[int32][]int) error {
	if !errors.Is(err, ErrNotLeader) {
		return err
	}
	for p := range byPart {
		if errs[p] == nil {
			return fmt.Errorf("%w: some partitions were written, the others are led elsewhere (%v)", ErrNotLeader, err)
		}
	}
	return err
}

// route assigns each record a partition and checks its size. It returns,
// per partition, the indexes of its records in input order.
func (s *streams) route(ts TopicSettings, recs []ProduceRecord, n int) (map[int32][]int, error) {
	if len(recs) == 0 {
		return nil, invalid("records", "nothing to produce")
	}
	byPart := map[int32][]int{}
	unkeyed := int32(-1)
	for i, r := range recs {
		if size := recordSize(r); size+batch.HeaderSize > ts.MaxMessageBytes {
			return nil, fmt.Errorf("%w: record %d is %d bytes, limit %d", ErrRecordTooLarge, i, size, ts.MaxMessageBytes)
		}
		if r.Key == nil && ts.Compacted() {
			return nil, fmt.Errorf("%w: record %d of topic %s", ErrKeyRequired, i, ts.Name)
		}
		var p int32
		switch {
		case r.Partition != nil:
			p = *r.Partition
			if p < 0 || int(p) >= n {
				return nil, fmt.Errorf("%w: %s/%d", ErrUnknownPartition, ts.Name, p)
			}
		case r.Key != nil:
			p = partitioner.ForKey(r.Key, int32(n))
		default:
			if unkeyed < 0 {
				unkeyed = int32(s.spread.Add(1) % uint32(n))
			}
			p = unkeyed
		}
		byPart[p] = append(byPart[p], i)
	}
	return byPart, nil
}

func recordSize(r ProduceRecord) int {
	n := len(r.Key) + len(r.Value) + recordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n
}

// producePartition builds the batches of one partition and appends them.
func (b *Broker) producePartition(ctx context.Context, p *partitionRT, s TopicSettings, recs []ProduceRecord,
	idx []int, now time.Time, idem *Idempotence, out []ProduceResult) error {
	pb, checked, err := buildPartition(p, s, recs, idx, now, idem, out)
	if err != nil {
		return err
	}
	res, err := b.appendBatches(ctx, p, checked)
	if err != nil {
		return err
	}
	pb.setOffsets(res.BaseOffsets)
	return nil
}

// buildPartition builds the batches of one partition's records (idx, in
// input order) under the topic's size limit, checked by its log, and fills
// each record's partition and timestamp in out.
func buildPartition(p *partitionRT, s TopicSettings, recs []ProduceRecord, idx []int, now time.Time,
	idem *Idempotence, out []ProduceResult) (*partBatches, storage.Checked, error) {
	pb := &partBatches{p: p, recs: recs, idx: idx, now: now, idem: idem, out: out}
	size := batch.HeaderSize
	for k, i := range idx {
		rs := recordSize(recs[i])
		if size+rs > s.MaxMessageBytes && k > pb.start {
			if idem != nil {
				return nil, storage.Checked{}, invalid("records", "an idempotent produce must fit in one batch of %d bytes", s.MaxMessageBytes)
			}
			if err := pb.flush(k); err != nil {
				return nil, storage.Checked{}, err
			}
			size = batch.HeaderSize
		}
		size += rs
	}
	if err := pb.flush(len(idx)); err != nil {
		return nil, storage.Checked{}, err
	}
	checked, err := p.log.Check(pb.batches...)
	if err != nil {
		return nil, storage.Checked{}, batchErr(err)
	}
	return pb, checked, nil
}

// setOffsets gives each record its offset from its batch's base.
func (pb *partBatches) setOffsets(bases []int64) {
	for j, base := range bases {
		end := len(pb.idx)
		if j+1 < len(pb.firsts) {
			end = pb.firsts[j+1]
		}
		for k := pb.firsts[j]; k < end; k++ {
			pb.out[pb.idx[k]].Offset = base + int64(k-pb.firsts[j])
		}
	}
}

// partBatches cuts one partition's records into batches under the
// topic's size limit.
type partBatches struct {
	p       *partitionRT
	recs    []ProduceRecord
	idx     []int // the partition's records, as indexes into recs
	now     time.Time
	idem    *Idempotence
	out     []ProduceResult
	start   int      // first record (index into idx) of the batch being built
	batches [][]byte // built so far
	firsts  []int    // index into idx of each batch's first record
}

// flush builds a batch of records idx[start:end].
func (pb *partBatches) flush(end int) error {
	brs := make([]batch.Record, 0, end-pb.start)
	for _, i := range pb.idx[pb.start:end] {
		r := pb.recs[i]
		ts := r.Timestamp
		if ts.IsZero() {
			ts = pb.now
		}
		brs = append(brs, batch.Record{Timestamp: ts.UnixMilli(), Key: r.Key, Value: r.Value, Headers: r.Headers})
		pb.out[i] = ProduceResult{Partition: pb.p.index, Timestamp: time.UnixMilli(ts.UnixMilli())}
	}
	var bo batch.Options
	if pb.idem != nil {
		bo.Producer = &batch.Producer{ID: pb.idem.Producer.ID, Epoch: pb.idem.Producer.Epoch, BaseSequence: pb.idem.BaseSequence}
	}
	raw, err := batch.Build(brs, bo)
	if err != nil {
		return err
	}
	pb.batches, pb.firsts = append(pb.batches, raw), append(pb.firsts, pb.start)
	pb.start = end
	return nil
}

// LeaderEpoch is stamped into every stored batch's partitionLeaderEpoch:
// a single broker is always the leader of epoch 0. The Kafka front-end
// reports it in Metadata and answers OffsetForLeaderEpoch(0) with the high
// watermark. (A cluster will stamp its Raft term instead.)
const LeaderEpoch int32 = 0

// ProduceBatchesResult answers ProduceBatches.
type ProduceBatchesResult struct {
	// BaseOffsets, one per batch: where it was stored, or for a retried
	// idempotent batch where it was stored the first time.
	BaseOffsets []int64
	// Duplicate, one per batch: true when the batch was a retry that was
	// not stored again.
	Duplicate      []bool
	LogStartOffset int64
}

// ProduceBatches stores Kafka record batches exactly as the client sent
// them (compressed ones stay compressed; only the base offset and leader
// epoch, outside the CRC, are stamped). The partition's log validates each
// batch first (magic, CRC-32C, lengths, records of uncompressed batches,
// the topic's maximum message size: storage.Log.Check); a bad batch fails
// the call with ErrCorruptBatch or ErrRecordTooLarge and nothing is
// written. Batches of an idempotent producer are then deduplicated and
// sequence-checked (see InitProducerID). Answers once durable.
//
// The check is storage's and happens once (docs/architecture.md, "One
// validation per batch"): before the producer checks, so that a damaged
// batch is refused as corrupt, not judged by a damaged producer id or
// sequence, and the very bytes checked are the ones appended.
func (b *Broker) ProduceBatches(ctx context.Context, topic string, partition int32, batches [][]byte) (ProduceBatchesResult, error) {
	return b.ProduceBatchesWith(ctx, topic, partition, batches, BatchOptions{})
}

// BatchOptions are what a Kafka produce request's version changes.
type BatchOptions struct {
	// TxnImplicitAdd: a transactional batch adds its partition to the
	// producer's transaction (Kafka's produce v12+, KIP-890 part 2) rather
	// than being refused when AddPartitionsToTxn did not add it.
	TxnImplicitAdd bool
}

// ProduceBatchesWith is ProduceBatches with options.
func (b *Broker) ProduceBatchesWith(ctx context.Context, topic string, partition int32, batches [][]byte, opts BatchOptions) (ProduceBatchesResult, error) {
	if err := b.disk.Admit(); err != nil {
		return ProduceBatchesResult{}, err
	}
	t, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return ProduceBatchesResult{}, err
	}
	if len(batches) == 0 {
		return ProduceBatchesResult{}, invalid("batches", "nothing to produce")
	}
	if limit := t.maxMessageBytes(); limit < logMaxBatchBytes {
		for i, bt := range batches {
			if len(bt) > limit {
				return ProduceBatchesResult{}, fmt.Errorf("%w: batch %d is %d bytes, limit %d", ErrRecordTooLarge, i, len(bt), limit)
			}
		}
	}
	checked, err := p.log.Check(batches...)
	if err != nil {
		return ProduceBatchesResult{}, batchErr(err)
	}
	release, err := b.admitTransactional(p, checked, opts.TxnImplicitAdd)
	if err != nil {
		return ProduceBatchesResult{}, err
	}
	defer release()
	if t.compacted() {
		if err := checkKeys(checked); err != nil {
			return ProduceBatchesResult{}, err
		}
	}
	return b.appendBatches(ctx, p, checked)
}

// batchErr maps the log's refusal of a batch (storage.Log.Check wraps a
// batch error) to the broker's typed errors.
func batchErr(err error) error {
	if errors.Is(err, batch.ErrTooLarge) {
		return fmt.Errorf("%w: %v", ErrRecordTooLarge, err)
	}
	return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
}

// appendBatches appends batches the log checked. Batches of idempotent
// producers are checked and placed one run at a time under the partition's
// producer lock, and synced outside it (appendIdempotent).
func (b *Broker) appendBatches(ctx context.Context, p *partitionRT, batches storage.Checked) (ProduceBatchesResult, error) {
	n := batches.Len()
	if b.cluster != nil {
		raws := make([][]byte, n)
		for i := range n {
			raws[i] = batches.Batch(i)
		}
		return b.appendReplicated(ctx, p, raws)
	}
	res := ProduceBatchesResult{BaseOffsets: make([]int64, n), Duplicate: make([]bool, n)}
	idempotent := false
	for i := range n {
		if h, _ := batch.ParseHeader(batches.Batch(i)); h.ProducerID >= 0 {
			idempotent = true
		}
	}
	if !idempotent {
		offs, err := p.log.AppendChecked(ctx, LeaderEpoch, batches)
		if err != nil {
			return ProduceBatchesResult{}, b.disk.Note(mapStorageErr(err))
		}
		copy(res.BaseOffsets, offs)
		res.LogStartOffset = p.log.LogStartOffset()
		p.owner.notifySubs()
		return res, nil
	}
	hs := make([]batch.Header, n)
	for i := range n {
		hs[i], _ = batch.ParseHeader(batches.Batch(i))
	}
	for i := 0; i < n; {
		k, err := b.appendIdempotent(ctx, p, batches.Slice(i, n), hs[i:], res.BaseOffsets[i:], res.Duplicate[i:])
		if err != nil {
			return ProduceBatchesResult{}, b.disk.Note(err)
		}
		i += k
	}
	res.LogStartOffset = p.log.LogStartOffset()
	p.owner.notifySubs()
	return res, nil
}

// appendIdempotent checks the first batch against its producer's state,
// places it in the log and records it, all under the partition's producer
// lock, then waits for the sync outside the lock, and says how many batches
// it handled. The lock is not held across the sync: the batches of other
// producers of the partition are placed meanwhile and share the next sync
// (held across it, N producers of one partition took N syncs in turn: 32
// producers wrote 14 times less than one). The batches right behind a new
// one that continue it (same producer and epoch, each starting at the
// sequence after the previous one ends, none already stored) go into the
// same placement. That is what a client with several produce requests in
// flight sends (the Kafka front-end hands such requests over together).
// Each is recorded exactly as if appended alone, since every one would have
// passed the check right after its predecessor was recorded. The wait
// ignores ctx cancellation: once placed its outcome must be known, or a
// retry could be stored twice.
func (b *Broker) appendIdempotent(ctx context.Context, p *partitionRT, raws storage.Checked, hs []batch.Header, bases []int64, dups []bool) (int, error) {
	h := hs[0]
	if h.ProducerID >= 0 {
		if err := b.streams.pids.Check(h.ProducerID, h.ProducerEpoch); err != nil {
			return 0, err
		}
	}
	n, wait, err := b.placeIdempotent(p, raws, hs, bases, dups)
	if err != nil {
		return 0, err
	}
	if err := wait(context.WithoutCancel(ctx)); err != nil {
		return 0, mapStorageErr(err)
	}
	return n, nil
}

// placeIdempotent is appendIdempotent's part under the producer lock; wait
// waits for what it placed, or for the duplicate it found to be durable.
func (b *Broker) placeIdempotent(p *partitionRT, raws storage.Checked, hs []batch.Header, bases []int64, dups []bool) (int, func(context.Context) error, error) {
	h := hs[0]
	p.prod.Lock()
	defer p.prod.Unlock()
	for {
		// Recorded batches are durable or placed at gen (producer.ReconcileLocked).
		gen := p.prod.ReconcileLocked(p.log, b.opts.FS, p.dir, b.log)
		n := 1
		if h.ProducerID >= 0 {
			dup, err := p.prod.CheckLocked(h)
			if err != nil {
				return 0, nil, err
			}
			if dup != nil {
				// A retry of a batch placed and maybe not durable yet: it is
				// answered only once the original is, as the original is.
				bases[0], dups[0] = dup.Base, true
				end := dup.Base + int64(h.LastOffsetDelta) + 1
				return 1, func(ctx context.Context) error { return p.log.WaitDurable(ctx, end, gen) }, nil
			}
			for n < raws.Len() && producer.Continues(hs[n-1], hs[n]) && !p.prod.StoredLocked(hs[n]) {
				n++
			}
		}
		placed, err := p.log.PlaceCheckedAt(LeaderEpoch, raws.Slice(0, n), gen)
		if errors.Is(err, storage.ErrGenerationChanged) {
			continue // a drop came between the reconcile and the placement
		}
		if err != nil {
			return 0, nil, mapStorageErr(err)
		}
		offs := placed.Offsets()
		for i := range n {
			if hs[i].ProducerID >= 0 {
				p.prod.RecordLocked(hs[i], offs[i])
			}
			bases[i] = offs[i]
		}
		return n, func(ctx context.Context) error { _, err := placed.Wait(ctx); return err }, nil
	}
}

// routeProduce is what Produce and PlaceProduce do first: admit the write (a full disk
// refuses it), find the topic, and route each record to its partition (indexes into recs
// by partition), at the broker's time now.
func (b *Broker) routeProduce(topic string, recs []ProduceRecord) (s TopicSettings, parts []*partitionRT, byPart map[int32][]int, now time.Time, err error) {
	if err = b.disk.Admit(); err != nil {
		return
	}
	t, err := b.streams.topic(topic)
	if err != nil {
		return
	}
	s, parts = t.snapshot()
	now = b.now()
	byPart, err = b.streams.route(s, recs, len(parts))
	return
}
