package broker

import (
	"context"
	"encoding/binary"
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
	if len(data) != 8 && len(data) != 16 {
		return 0, 0, fmt.Errorf("partition %s/%d: checkpoint of %d bytes, want 16", r.p.topic, r.p.index, len(data))
	}
	return r.p.log.HighWatermark(), int64(binary.BigEndian.Uint64(data)), nil
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
	for data, next := rg.Data, rg.Start; len(data) > 0; {
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
