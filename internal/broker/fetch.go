package broker

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// FetchOptions bound a Fetch.
type FetchOptions struct {
	MaxBytes int // about this many bytes; at least one whole batch. Default 1 MiB
	// MinBytes: wait until at least this many bytes are available (Kafka's
	// fetch.min.bytes), or MaxWait passes. 0 answers at once.
	MinBytes int
	MaxWait  time.Duration
}

// PartitionState is a partition's offsets, as a fetch reports them.
type PartitionState struct {
	HighWatermark int64
	// LastStableOffset is the first offset of the oldest open transaction,
	// or the high watermark: read_committed readers stop there.
	LastStableOffset int64
	LogStartOffset   int64
}

// FetchResult is what Fetch read.
type FetchResult struct {
	PartitionState
	// Batches are whole record batches, back to back, exactly as stored;
	// the first may start before the requested offset (Kafka clients skip
	// the records below it). Empty when nothing arrived in time. Only
	// committed records: none at or past the last stable offset, no
	// control batch, no batch of an aborted transaction.
	Batches []byte
	// Next is where the reader goes on after these batches, past any left
	// out; -1 when nothing was read.
	Next int64
}

func partitionState(p *partitionRT) PartitionState {
	// The log start first: a concurrent retention can only raise it, and
	// the high watermark read after it is never below it.
	start := p.log.LogStartOffset()
	hw := p.log.HighWatermark()
	// An open transaction whose first records retention removed is
	// stable from the log start: there is nothing older to wait for.
	return PartitionState{HighWatermark: hw, LastStableOffset: max(p.txn.lso(hw), start), LogStartOffset: start}
}

// Fetch reads batches from offset. If fewer than MinBytes are available it
// waits, woken by appends, up to MaxWait (or until ctx ends, which answers
// with what there is). An offset below the log start or above the high
// watermark fails with ErrOffsetOutOfRange; the high watermark itself is
// the end of the log: nothing yet.
func (b *Broker) Fetch(ctx context.Context, topic string, partition int32, offset int64, opts FetchOptions) (FetchResult, error) {
	_, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return FetchResult{}, err
	}
	if err := b.checkLeader(p); err != nil {
		return FetchResult{}, err
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	var deadline <-chan time.Time
	if opts.MaxWait > 0 && opts.MinBytes > 0 {
		t := time.NewTimer(opts.MaxWait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		st := partitionState(p)
		data, err := p.log.Read(offset, opts.MaxBytes)
		if err != nil {
			return FetchResult{}, mapStorageErr(err)
		}
		data, next := p.committedBatches(data, st.LastStableOffset)
		if len(data) >= opts.MinBytes || deadline == nil {
			return FetchResult{PartitionState: st, Batches: data, Next: next}, nil
		}
		// Not enough yet: wait for the log to grow past what we saw.
		if !waitLog(ctx, p, st.HighWatermark, deadline) {
			return FetchResult{PartitionState: partitionState(p), Batches: data, Next: next}, nil
		}
	}
}

// waitLog waits until the log's high watermark passes hw; false when the
// deadline or ctx ended the wait first.
func waitLog(ctx context.Context, p *partitionRT, hw int64, deadline <-chan time.Time) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.log.Wait(wctx, hw) }()
	select {
	case err := <-done:
		return err == nil
	case <-deadline:
		cancel()
		<-done
		return false
	}
}

// FetchPosition is one partition a multi-partition fetch reads.
type FetchPosition struct {
	Topic     string
	Partition int32
	Offset    int64
}

// WaitForData returns when any of the partitions has a high watermark past
// its position, ctx ends, or maxWait passes: the long-poll of a Kafka fetch
// over many partitions. It reports whether data arrived. Unknown
// partitions are ignored (the fetch itself reports them).
func (b *Broker) WaitForData(ctx context.Context, pos []FetchPosition, maxWait time.Duration) bool {
	parts := make([]*partitionRT, len(pos))
	for i, fp := range pos {
		_, p, err := b.streams.partition(fp.Topic, fp.Partition)
		if err != nil {
			continue
		}
		if p.log.HighWatermark() > fp.Offset {
			return true
		}
		parts[i] = p
	}
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel (defers run last first): every waiter has stopped
	wctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	got := make(chan struct{}, len(pos))
	waiting := 0
	for i, fp := range pos {
		p := parts[i]
		if p == nil {
			continue
		}
		waiting++
		wg.Go(func() {
			if p.log.Wait(wctx, fp.Offset) == nil {
				got <- struct{}{}
			}
		})
	}
	if waiting == 0 {
		return false
	}
	select {
	case <-got:
		return true
	case <-wctx.Done():
		return len(got) > 0
	}
}

// Special timestamps of ListOffsets, Kafka's.
const (
	OffsetLatest   int64 = -1 // the high watermark
	OffsetEarliest int64 = -2 // the log start offset
	// OffsetMaxTimestamp is KIP-734's "the record with the largest
	// timestamp": its offset and timestamp.
	OffsetMaxTimestamp int64 = -3
)

// OffsetAt is a ListOffsets answer. Offset -1 means no record is at or after
// the timestamp (Kafka's answer too).
type OffsetAt struct {
	Offset    int64
	Timestamp int64 // ms; -1 for earliest and latest
}

// ListOffsets resolves ts: OffsetEarliest, OffsetLatest, or a time in
// milliseconds, for which it returns the first offset whose timestamp is at
// or after ts (for a compressed batch: its base offset).
func (b *Broker) ListOffsets(topic string, partition int32, ts int64) (OffsetAt, error) {
	_, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return OffsetAt{}, err
	}
	if err := b.checkLeader(p); err != nil {
		return OffsetAt{}, err
	}
	switch ts {
	case OffsetEarliest:
		return OffsetAt{Offset: p.log.LogStartOffset(), Timestamp: -1}, nil
	case OffsetLatest:
		return OffsetAt{Offset: p.log.HighWatermark(), Timestamp: -1}, nil
	case OffsetMaxTimestamp:
		return maxTimestamp(p)
	case OffsetLastStable:
		return lastStable(p), nil
	}
	if ts < 0 {
		return OffsetAt{}, invalid("timestamp", "%d: want -1, -2, -3 or a time in ms", ts)
	}
	off, err := p.log.OffsetForTime(ts)
	if err != nil || off < 0 {
		return OffsetAt{Offset: -1, Timestamp: -1}, mapStorageErr(err)
	}
	return OffsetAt{Offset: off, Timestamp: recordTime(p, off)}, nil
}

// recordTime returns the timestamp of the record at off (its batch's base
// timestamp for a compressed batch), or -1 if it cannot be read.
func recordTime(p *partitionRT, off int64) int64 {
	data, err := p.log.Read(off, 1)
	if err != nil || len(data) == 0 {
		return -1
	}
	n, err := batch.FrameSize(data)
	if err != nil {
		return -1
	}
	h, _ := batch.ParseHeader(data)
	for r, err := range batch.Records(data[:n]) {
		if err != nil {
			break
		}
		if r.Offset >= off {
			return r.Timestamp
		}
	}
	return h.BaseTimestamp
}
