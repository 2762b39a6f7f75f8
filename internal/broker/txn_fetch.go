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
