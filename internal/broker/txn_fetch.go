package broker

import "github.com/sluice-mq/sluice/internal/batch"

// readCommittedSection is FetchSection for a read_committed reader: whole
// batches below the last stable offset only (it is always a batch's base
// offset: the first of an open transaction), with the aborted
// transactions among them, which the reader skips by producer id. An
// offset at or past the LSO answers nothing, not an error: the records
// are there but not yet decided.
func readCommittedSection(p *partitionRT, st PartitionState, offset int64, opts SectionOptions) (SectionResult, error) {
	lso := st.LastStableOffset
	if offset >= lso && offset <= st.HighWatermark {
		return SectionResult{PartitionState: st}, nil
	}
	keep := func(h batch.Header) bool {
		return h.BaseOffset < lso && (!opts.NoZstd || notZstd(h))
	}
	sec, stopped, err := p.log.ReadSectionWhile(offset, opts.MaxBytes, keep)
	if err != nil {
		return SectionResult{}, mapStorageErr(err)
	}
	res := SectionResult{PartitionState: st, Section: sec}
	if stopped && sec.Length == 0 && opts.NoZstd {
		// Stopped at the first batch, below the LSO: a zstd one.
		if h, err := p.log.HeaderAt(offset); err == nil && h.BaseOffset < lso && !notZstd(h) {
			return res, ErrUnsupportedCompression
		}
	}
	if sec.Length > 0 {
		res.Aborted = p.txn.abortedIn(offset, lso)
	}
	return res, nil
}

// OffsetLastStable asks ListOffsets for the last stable offset: the
// latest offset a read_committed reader sees (sluice's own code, never
// sent by a client).
const OffsetLastStable int64 = -100

// lastStable answers ListOffsets(OffsetLastStable).
func lastStable(p *partitionRT) OffsetAt {
	return OffsetAt{Offset: partitionState(p).LastStableOffset, Timestamp: -1}
}

// committedBatches is what a reader that must never see an aborted or
// open record gets of data (whole batches, as a log read returns them):
// the batches below lso, without control batches and without the batches
// of aborted transactions. next is the offset after the last batch looked
// at below lso: where such a reader goes on, past what was left out. With
// nothing to leave out, data itself is returned (no copy).
func (p *partitionRT) committedBatches(data []byte, lso int64) (out []byte, next int64) {
	var aborted []AbortedTxn
	copied := false
	next = -1
	for rest, at := data, 0; len(rest) > 0; {
		h, err := batch.ParseHeader(rest)
		if err != nil || h.Size() > int64(len(rest)) {
			break
		}
		size := int(h.Size())
		if h.BaseOffset >= lso {
			if !copied {
				out, copied = data[:at], true
			}
			break
		}
		next = h.NextOffset()
		skip := h.Control()
		if !skip && h.Transactional() {
			if aborted == nil {
				aborted = p.txn.abortedIn(h.BaseOffset, lso)
			}
			skip = isAborted(aborted, h)
		}
		switch {
		case skip && !copied:
			out, copied = append([]byte(nil), data[:at]...), true
		case !skip && copied:
			out = append(out, rest[:size]...)
		}
		rest, at = rest[size:], at+size
	}
	if !copied {
		out = data
	}
	return out, next
}

// isAborted reports whether a transactional batch belongs to one of the
// aborted transactions: its producer's, between its first offset and its
// marker.
func isAborted(aborted []AbortedTxn, h batch.Header) bool {
	for _, a := range aborted {
		if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset < a.LastOffset {
			return true
		}
	}
	return false
}

// OpenTransactions returns, per producer id, the first offset of its open
// transaction in the partition (DescribeProducers' current_txn_start_offset;
// kafka-transactions.sh find-hanging reads it).
func (b *Broker) OpenTransactions(topic string, partition int32) (map[int64]int64, error) {
	_, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return nil, err
	}
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	out := make(map[int64]int64, len(p.txn.open))
	for pid, first := range p.txn.open {
		out[pid] = first
	}
	return out, nil
}
