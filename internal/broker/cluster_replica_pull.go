package broker

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
)

// A replica's local log behind its group's snapshot is filled from a peer's local log
// (replpart pulls the range through the node-to-node transport): ReadRange serves a peer,
// AppendRange takes what a peer served. Records keep their offsets and leader epochs; the
// bytes are the very batches the source stored, checked again on the way in, with the
// offsets a cleaner left without a batch sent as empty batches (batch.Fillers).

// Lacks is the range of a checkpoint's offsets the local log does not hold, read only: a
// snapshot's preparation pulls it before raft sees the snapshot (replpart.PrepareSnapshot).
func (r *replicaLog) Lacks(data []byte) (from, to int64, err error) {
	cp, err := decodeCheckpoint(data)
	if err == nil && len(data) == 0 {
		err = fmt.Errorf("%w: empty", errBadCheckpoint)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("partition %s/%d: %w", r.p.topic, r.p.index, err)
	}
	return r.p.log.HighWatermark(), cp.hw, nil
}

// ReadRange reads whole batches of the local log for a peer's pull: from from (or the log
// start, if retention deleted what was below it) up to before to, about maxBytes. It runs
// on the transport's goroutines, beside Apply, and only reads.
func (r *replicaLog) ReadRange(from, to int64, maxBytes int) (replpart.Range, error) {
	l := r.p.log
	start := max(from, l.LogStartOffset())
	if start >= to {
		// Everything asked for is below this log's start: the puller's log starts at to.
		return replpart.Range{Start: to, Next: to}, nil
	}
	if start >= l.HighWatermark() {
		return replpart.Range{Start: from, Next: from}, nil // holds nothing there
	}
	data, err := l.Read(start, maxBytes)
	if err != nil {
		return replpart.Range{}, err
	}
	out := replpart.Range{Start: start, Next: start}
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil {
			return replpart.Range{}, fmt.Errorf("partition %s/%d: batch at %d: %w", r.p.topic, r.p.index, out.Next, err)
		}
		if h.BaseOffset > out.Next {
			// Offsets without a batch: the cleaner's (sent as empty batches, so the
			// puller's log has no gap), or a damaged batch skipped, which no replica
			// may vouch for: the puller asks another.
			gapTo := min(h.BaseOffset, to)
			if r.damagedIn(out.Next, gapTo) {
				return replpart.Range{}, fmt.Errorf("partition %s/%d: offsets %d..%d are damaged here", r.p.topic, r.p.index, out.Next, gapTo)
			}
			for _, f := range batch.Fillers(out.Next, gapTo, h.PartitionLeaderEpoch, h.BaseTimestamp) {
				out.Data = append(out.Data, f...)
			}
			out.Next = gapTo
		}
		if h.BaseOffset >= to {
			break
		}
		if h.BaseOffset < start && start < h.NextOffset() && out.Next == start && len(out.Data) == 0 && start == l.LogStartOffset() {
			// The log starts inside this batch (a DeleteRecords to an offset inside it):
			// it is sent whole, Start still the log start, and the puller stores it and
			// starts its log at the same offset (AppendRange).
			size := int(h.Size())
			if h.NextOffset() > to || h.Size() > int64(len(data)) {
				return replpart.Range{}, fmt.Errorf("partition %s/%d: batch at %d..%d across the log start %d does not fit before %d",
					r.p.topic, r.p.index, h.BaseOffset, h.NextOffset(), start, to)
			}
			out.Data = append(out.Data, data[:size]...)
			out.Next = h.NextOffset()
			data = data[size:]
			continue
		}
		if h.BaseOffset != out.Next || h.NextOffset() > to || h.Size() > int64(len(data)) {
			// A batch across the checkpoint, or one that starts below where it should:
			// not a range this replica can vouch for; the puller asks another.
			return replpart.Range{}, fmt.Errorf("partition %s/%d: batch at %d..%d where offset %d was wanted (before %d)",
				r.p.topic, r.p.index, h.BaseOffset, h.NextOffset(), out.Next, to)
		}
		size := int(h.Size())
		out.Data = append(out.Data, data[:size]...)
		out.Next = h.NextOffset()
		data = data[size:]
	}
	return out, nil
}

// damagedIn reports whether a quarantined (damaged) range of the local log overlaps the
// offsets [from, to).
func (r *replicaLog) damagedIn(from, to int64) bool {
	for _, q := range r.p.log.Quarantined() {
		if q.FirstOffset < to && q.LastOffset >= from {
			return true
		}
	}
	return false
}

// AppendRange appends batches a peer served, at their offsets and with their epochs. A
// range that starts past this log's end (the source's retention deleted what lies
// between) first resets this log to start there, as a Kafka follower truncates to its
// leader's log start.
func (r *replicaLog) AppendRange(at int64, rg replpart.Range) error {
	p := r.p
	if end := p.log.HighWatermark(); at < end {
		return fmt.Errorf("partition %s/%d: a pulled range at %d, but the log ends at %d", p.topic, p.index, at, end)
	}
	if rg.Start > p.log.HighWatermark() {
		if err := p.log.Reset(rg.Start); err != nil {
			return err
		}
	}
	var raws [][]byte
	next, startInside := rg.Start, int64(-1)
	if h, err := batch.ParseHeader(rg.Data); err == nil && h.BaseOffset < rg.Start && rg.Start < h.NextOffset() {
		// The source's log starts inside its first batch (ReadRange): so does this one,
		// which must be empty there.
		if l := p.log; l.LogStartOffset() != rg.Start || l.HighWatermark() != rg.Start {
			return fmt.Errorf("partition %s/%d: a pulled batch across the log start %d, but the log holds [%d, %d)",
				p.topic, p.index, rg.Start, l.LogStartOffset(), l.HighWatermark())
		}
		if err := p.log.Reset(h.BaseOffset); err != nil {
			return err
		}
		next, startInside = h.BaseOffset, rg.Start
	}
	for data := rg.Data; len(data) > 0; {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Size() > int64(len(data)) || h.BaseOffset != next {
			return fmt.Errorf("partition %s/%d: pulled batch at offset %d is not whole or not in place (%v)", p.topic, p.index, next, err)
		}
		raws = append(raws, data[:h.Size()])
		next = h.NextOffset()
		data = data[h.Size():]
	}
	if len(raws) == 0 {
		return nil
	}
	// AppendCopied checks every batch again (CRC, framing, records) and keeps its epoch
	// and its span (a cleaned batch holds fewer records than offsets; the gaps between
	// came as empty batches): only the base offset is stamped, and the log's end is where
	// each batch was.
	offs, err := p.log.AppendCopied(context.Background(), raws...)
	if err != nil {
		return fmt.Errorf("partition %s/%d: append pulled batches: %w", p.topic, p.index, err)
	}
	for i, raw := range raws {
		if h, _ := batch.ParseHeader(raw); offs[i] != h.BaseOffset {
			return fmt.Errorf("partition %s/%d: pulled batch of offset %d stored at %d", p.topic, p.index, h.BaseOffset, offs[i])
		}
	}
	if startInside >= 0 {
		if _, err := p.log.MoveStart(startInside); err != nil {
			return fmt.Errorf("partition %s/%d: start the log at %d inside a pulled batch: %w", p.topic, p.index, startInside, err)
		}
	}
	p.owner.notifySubs()
	return nil
}

// pullRegistry keeps every partition machine made on this node, by group, for the pull
// metrics (a machine's pull at start-up runs before its partition knows its replica).
type pullRegistry struct {
	mu sync.Mutex
	m  map[multiraft.GroupID]*replpart.Machine
}

func (r *pullRegistry) add(g multiraft.GroupID, m *replpart.Machine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[multiraft.GroupID]*replpart.Machine{}
	}
	r.m[g] = m
}

// ReplicaPullStats sums the pulls of this node's partition replicas (zero outside a
// cluster): Target-At is the offsets the pulls under way still lack.
func (b *Broker) ReplicaPullStats() replpart.PullStats {
	var out replpart.PullStats
	if b.cluster == nil {
		return out
	}
	r := &b.cluster.pulls
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.m {
		s := m.PullStats()
		out.Pulls, out.Chunks, out.Bytes, out.Failures = out.Pulls+s.Pulls, out.Chunks+s.Chunks, out.Bytes+s.Bytes, out.Failures+s.Failures
		out.At, out.Target = out.At+s.At, out.Target+s.Target
	}
	return out
}
