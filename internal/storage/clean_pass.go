package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// cleanPass is one pass of Clean.
type cleanPass struct {
	l     *Log
	o     CleanOptions
	now   int64 // ms, from the log's clock: tombstone retention
	segs  []cleanSeg
	st    *CleanStats
	m     *offsetMap
	start time.Time // the pass's start, for the rate limit
	// lastBatch is the base offset of each idempotent producer's last batch
	// in the mapped part: an emptied batch of the producer below it goes,
	// the others are kept (empty), so the producer's sequence survives in
	// the log.
	lastBatch map[int64]int64
	txns      *txnWalk // nil: no transactions known (clean_txn.go)
}

// readChunk is how much the cleaner reads at once.
const readChunk = 1 << 20

var errMapFull = errors.New("storage: clean: offset map full")

// eachBatch calls fn with every batch of cs from offset from on, in
// order, through Read (so every byte is checked and damage is quarantined,
// not cleaned).
func (p *cleanPass) eachBatch(cs cleanSeg, from int64, fn func([]byte, batch.Header) error) error {
	// A log start moved inside the first segment (MoveStart, Kafka's
	// DeleteRecords): below it nothing is read, nor kept.
	for off := max(from, p.l.LogStartOffset()); off < cs.end; {
		if err := p.stopped(); err != nil {
			return err
		}
		buf, err := p.l.Read(off, readChunk)
		if err != nil {
			if errors.Is(err, ErrOffsetOutOfRange) {
				return fmt.Errorf("%w: %v", errCleanRaced, err)
			}
			return err
		}
		if len(buf) == 0 {
			return nil
		}
		p.st.BytesRead += int64(len(buf))
		for len(buf) > 0 {
			h, _ := batch.ParseHeader(buf)
			if h.BaseOffset >= cs.end {
				return nil // the rest of cs is a gap: Read went on into the next segment
			}
			if err := fn(buf[:h.Size()], h); err != nil {
				return err
			}
			buf, off = buf[h.Size():], h.NextOffset()
		}
		p.throttle()
	}
	return nil
}

// buildMap maps the dirty part, from offset from in segment firstDirty,
// while it fits. It returns how many segments (from the first) the pass
// cleans and the offset the mapping reached: the end of the last of them,
// or the batch inside it where the map filled up (the next pass maps on
// from there).
func (p *cleanPass) buildMap(firstDirty int, from int64) (int, int64, error) {
	through, mapEnd := firstDirty, from
	for i := firstDirty; i < len(p.segs); i++ {
		start := p.segs[i].base
		if i == firstDirty {
			start = from
		}
		stopAt := int64(-1)
		err := p.eachBatch(p.segs[i], start, func(b []byte, h batch.Header) error {
			if h.Control() || (h.Transactional() && p.txns == nil) {
				// Never mapped: markers have no key, and a record of a
				// transaction that may be aborted must not supersede a
				// committed one.
				return nil
			}
			if h.Transactional() && p.txns.isAborted(h) {
				p.lastBatch[h.ProducerID] = h.BaseOffset // its records go, the batch may stay
				return nil
			}
			if p.m.free() < int(h.RecordCount) {
				stopAt = h.BaseOffset
				return errMapFull
			}
			if h.ProducerID >= 0 {
				p.lastBatch[h.ProducerID] = h.BaseOffset
			}
			for r, err := range batch.Records(b) {
				if err != nil {
					return nil // cannot be read (an inflate limit): kept whole, never mapped
				}
				if r.Key != nil {
					p.m.put(hashKey(r.Key), r.Offset)
				}
			}
			return nil
		})
		switch {
		case errors.Is(err, errMapFull) && stopAt > start:
			return i + 1, stopAt, nil // cleaned through segment i, mapped up to stopAt
		case errors.Is(err, errMapFull) && i > firstDirty:
			return through, mapEnd, nil
		case errors.Is(err, errMapFull):
			return 0, 0, fmt.Errorf("storage: clean: offset map of %d keys cannot hold one batch: raise --compaction-buffer", p.m.limit)
		case err != nil:
			return 0, 0, err
		}
		through, mapEnd = i+1, p.segs[i].end
	}
	return through, mapEnd, nil
}

// cleanRun rewrites the run g into one new segment and swaps it in; the
// pass mapped the log up to mapEnd.
func (p *cleanPass) cleanRun(g []cleanSeg, mapEnd int64) error {
	w, err := newCleanWriter(p.l.opts.FS, p.l.opts.Dir, g[0].base, int64(p.l.opts.IndexIntervalBytes))
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			w.abort()
		}
	}()
	maxTS, changed, dirty := int64(-1), len(g) > 1, false
	var cleanedAt, horizon int64
	var tot filtered
	if p.txns != nil {
		p.txns.drop = p.txns.drop[:0]
	}
	for _, cs := range g {
		dirty = dirty || !cs.s.gapped || cs.s.mark.cleanedTo < cs.end
		cleanedAt = max(cleanedAt, cs.s.mark.cleanedAt)
		// Tombstones a clean passed at least DeleteRetention ago go.
		purgeBelow := int64(-1)
		if cs.s.gapped && cs.s.mark.cleanedAt+p.o.DeleteRetention.Milliseconds() <= p.now {
			purgeBelow = cs.s.mark.cleanedTo
		}
		err := p.eachBatch(cs, cs.base, func(b []byte, h batch.Header) error {
			maxTS = max(maxTS, h.MaxTimestamp)
			out, f := p.filter(b, h, purgeBelow)
			tot.add(f)
			changed = changed || f.removed > 0 || f.rewritten
			if f.horizon > 0 && (horizon == 0 || f.horizon < horizon) {
				horizon = f.horizon
			}
			if out == nil {
				changed = true
				return nil
			}
			return w.add(out)
		})
		if err != nil {
			return err
		}
		maxTS = max(maxTS, cs.s.maxTimestamp())
	}
	if !changed && !dirty {
		return nil // nothing to drop in an already clean segment: keep it
	}
	if dirty {
		cleanedAt = p.now
	}
	mi := markerInfo{cleanedAt: cleanedAt, tombstones: tot.tombsKept, cleanedTo: min(g[len(g)-1].end, mapEnd), horizon: horizon}
	if err := w.finish(g[len(g)-1].end, maxTS, mi); err != nil {
		return err
	}
	if err := p.beforeSwap(); err != nil {
		return fmt.Errorf("storage: clean: %s: before removing transaction markers: %w", fmtRun(g), err)
	}
	if err := p.l.swapIn(g, w.base, mi); err != nil {
		return fmt.Errorf("%s: %w", fmtRun(g), err)
	}
	done = true
	p.st.Cleaned = true
	p.st.BytesWritten += w.size
	p.st.SegmentsIn += len(g)
	p.st.SegmentsOut++
	p.st.RecordsRemoved += tot.removed
	p.st.TombstonesRemoved += tot.tombsRemoved
	p.st.AbortedRemoved += tot.abortedRemoved
	p.st.MarkersRemoved += tot.markersRemoved
	p.throttle()
	return nil
}

// filtered counts what filter did to one batch.
type filtered struct {
	removed, tombsRemoved, tombsKept int64
	abortedRemoved, markersRemoved   int64
	rewritten                        bool  // the batch changed though no record went (a delete horizon set)
	horizon                          int64 // a kept marker's delete horizon; 0: none
}

func (f *filtered) add(o filtered) {
	f.removed += o.removed
	f.tombsRemoved += o.tombsRemoved
	f.tombsKept += o.tombsKept
	f.abortedRemoved += o.abortedRemoved
	f.markersRemoved += o.markersRemoved
}

// filter returns the batch with the records the map supersedes (and
// tombstones below purgeBelow, and records of aborted transactions)
// removed: b itself if nothing goes, nil if the whole batch goes. It sees
// the batches in offset order from the log start, which the transaction
// walk needs.
func (p *cleanPass) filter(b []byte, h batch.Header, purgeBelow int64) ([]byte, filtered) {
	switch {
	case (h.Control() || h.Transactional()) && p.txns == nil:
		return b, filtered{} // transactions unknown: see clean_txn.go
	case h.Control():
		return p.filterMarker(b, h)
	}
	out, f := p.filterData(b, h, purgeBelow)
	if out != nil && h.Transactional() {
		p.txns.kept[h.ProducerID] = true // its marker stays while this batch does
	}
	return out, f
}

func (p *cleanPass) filterData(b []byte, h batch.Header, purgeBelow int64) ([]byte, filtered) {
	var f filtered
	aborted := h.Transactional() && p.txns.isAborted(h)
	var kept []batch.Record
	for r, err := range batch.Records(b) {
		if err != nil {
			return b, filtered{} // unreadable: kept whole, as buildMap left it unmapped
		}
		if aborted {
			f.removed++
			f.abortedRemoved++
			continue
		}
		if r.Key != nil {
			if latest, ok := p.m.get(hashKey(r.Key)); ok && r.Offset < latest {
				f.removed++
				continue
			}
		}
		if r.Value == nil && r.Key != nil {
			if r.Offset < purgeBelow {
				f.removed++
				f.tombsRemoved++
				continue
			}
			f.tombsKept++
		}
		kept = append(kept, r)
	}
	if len(kept) == 0 {
		if last, seen := p.lastBatch[h.ProducerID]; h.ProducerID < 0 || (seen && last > h.BaseOffset) {
			return nil, f
		}
		// The producer's last batch as far as the pass knows: kept empty
		// so its sequence survives.
	}
	if f.removed == 0 {
		return b, f
	}
	return batch.Rebuild(h, kept), f
}
