package storage

import (
	"errors"
	"fmt"
	"time"
)

// Log compaction (the cleaner).
//
// Clean runs one pass of Kafka's log cleaner over a log: it keeps the
// latest record of each key and drops the rest, in sealed segments only
// (never the active one). A pass
//
//  1. takes the cleanable prefix of the sealed segments: those older than
//     MinCompactionLag (by their newest timestamp) and ending at or below
//     Below; within it, segments up to the last one carrying a .compacted
//     marker are the clean part, the rest the dirty part;
//  2. cleans only if the dirty part is at least MinDirtyRatio of the
//     cleanable bytes, or its first segment is older than
//     MaxCompactionLag, or a clean segment holds tombstones whose
//     DeleteRetention is over;
//  3. reads the dirty part, from where the last pass stopped, into an
//     offsetMap (key hash → latest offset) of BufferBytes until it is
//     full (the next pass goes on from that batch: clean_marker.go);
//  4. rewrites every segment from the log start through the last mapped
//     one, in runs that fit in one segment, dropping each record whose key
//     has a later offset in the map, and tombstones (null values) in
//     segments cleaned at least DeleteRetention ago; each run is swapped in
//     crash-safely (clean_swap.go).
//
// Batches keep their base offset, lastOffsetDelta, producer id, epoch and
// base sequence (batch.Rebuild), so offsets keep their gaps and the
// producer state rebuilt from the log is unchanged; a batch that loses
// every record (or was already empty) is dropped, except the last batch of
// an idempotent producer, kept empty as Kafka does: an emptied batch goes
// only when the mapped part holds a later batch of its producer. A batch
// that loses nothing is copied byte for byte (compression kept); a
// rewritten one is uncompressed. Records without a key are kept (the
// broker refuses them on a compacted topic). Transactions: clean_txn.go.

// CleanOptions configure one pass of Clean. Zero values take the defaults
// listed.
type CleanOptions struct {
	// MinDirtyRatio: clean only when the dirty part is at least this
	// fraction of the cleanable bytes (min.cleanable.dirty.ratio). 0: any
	// dirty byte.
	MinDirtyRatio float64
	// MinCompactionLag: segments with a record newer than this are not
	// cleaned yet (min.compaction.lag.ms).
	MinCompactionLag time.Duration
	// MaxCompactionLag: clean whatever the ratio once the first dirty
	// segment is this old (max.compaction.lag.ms). 0: no limit.
	MaxCompactionLag time.Duration
	// DeleteRetention: a tombstone is dropped this long after the pass that
	// first cleaned it (delete.retention.ms).
	DeleteRetention time.Duration
	// BufferBytes bounds the offset map (24 bytes a key); default 32 MiB.
	BufferBytes int64
	// BytesPerSecond bounds the pass's reads plus writes; 0: no limit.
	BytesPerSecond int64
	// Below: clean only segments that end at or below this offset (a
	// replicated partition passes its last checkpoint). 0: no bound.
	Below int64
	// Sleep waits for the rate limit; default time.Sleep.
	Sleep func(time.Duration)
	// Stop, when closed, ends the pass early (its swaps done so far stay).
	Stop <-chan struct{}
	// Txns are the log's transactions (clean_txn.go); Below must then be
	// at or below the last stable offset, and 0 cleans nothing. nil:
	// transactional batches and markers are left as they are.
	Txns *CleanTxns
}

// DefaultCleanBufferBytes is the offset map's default size.
const DefaultCleanBufferBytes = 32 << 20

// CleanStats is what one pass found and did.
type CleanStats struct {
	DirtyBytes, CleanBytes int64 // of the cleanable segments, before the pass
	Cleaned                bool  // the pass rewrote segments (it may find nothing to do)
	BytesRead              int64
	BytesWritten           int64
	SegmentsIn             int // segments replaced
	SegmentsOut            int // segments that replaced them
	RecordsRemoved         int64
	TombstonesRemoved      int64
	AbortedRemoved         int64 // records of aborted transactions (in RecordsRemoved too)
	MarkersRemoved         int64 // transaction markers past their delete horizon
}

// DirtyRatio is DirtyBytes over the cleanable bytes; 0 for an empty log.
func (s CleanStats) DirtyRatio() float64 {
	if s.DirtyBytes+s.CleanBytes == 0 {
		return 0
	}
	return float64(s.DirtyBytes) / float64(s.DirtyBytes+s.CleanBytes)
}

// errCleanRaced: retention or a truncation changed the segments a run was
// built from; the run is dropped and the next pass starts over.
var errCleanRaced = errors.New("storage: segments changed during the clean")

// errCleanStopped: CleanOptions.Stop was closed.
var errCleanStopped = errors.New("storage: clean stopped")

// Clean runs one pass of the cleaner (see CleanOptions). Passes of one log
// run one at a time; appends and reads go on during a pass, except for the
// moment each run is swapped in.
func (l *Log) Clean(o CleanOptions) (CleanStats, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if o.BufferBytes <= 0 {
		o.BufferBytes = DefaultCleanBufferBytes
	}
	if o.Sleep == nil {
		o.Sleep = time.Sleep
	}
	segs, firstDirty, dirtyFrom, err := l.cleanable(o)
	if err != nil {
		return CleanStats{}, err
	}
	var st CleanStats
	for i, cs := range segs {
		if i < firstDirty {
			st.CleanBytes += cs.size
		} else {
			st.DirtyBytes += cs.size
		}
	}
	if !l.shouldClean(o, segs, firstDirty, st) {
		return st, nil
	}
	p := &cleanPass{l: l, o: o, now: l.opts.Now().UnixMilli(), segs: segs, st: &st,
		m: newOffsetMap(o.BufferBytes), lastBatch: map[int64]int64{}, start: time.Now(), txns: newTxnWalk(o.Txns)}
	through, mapEnd, err := p.buildMap(firstDirty, dirtyFrom)
	if err != nil {
		return st, err
	}
	for _, g := range groupRuns(segs[:through], l.segBytes.Load()) {
		if err := p.cleanRun(g, mapEnd); err != nil {
			if errors.Is(err, errCleanRaced) || errors.Is(err, errCleanStopped) {
				return st, nil
			}
			return st, err
		}
	}
	return st, nil
}

// cleanSeg is a segment as a pass saw it.
type cleanSeg struct {
	s               *segment
	base, end, size int64
}

// cleanable lists the cleanable prefix of the sealed segments, the index of
// its first dirty one (len if none) and the offset the dirty part starts at
// (inside that segment when a map filled there).
func (l *Log) cleanable(o CleanOptions) ([]cleanSeg, int, int64, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, 0, 0, ErrClosed
	}
	var all []cleanSeg
	for _, s := range l.segs[:len(l.segs)-1] {
		all = append(all, cleanSeg{s: s, base: s.base, end: s.sealedNext, size: s.size.Load()})
	}
	l.mu.RUnlock()
	lagCut := l.opts.Now().Add(-o.MinCompactionLag).UnixMilli()
	n := 0
	for _, cs := range all {
		if (o.Below > 0 || o.Txns != nil) && cs.end > o.Below {
			break
		}
		if o.MinCompactionLag > 0 {
			if ts := cs.s.maxTimestamp(); ts < 0 || ts > lagCut {
				break
			}
		}
		n++
	}
	all = all[:n]
	firstDirty, from := 0, int64(0)
	if n > 0 {
		from = all[0].base
	}
	for i, cs := range all {
		switch {
		case !cs.s.gapped:
		case cs.s.mark.cleanedTo >= cs.end:
			firstDirty = i + 1
			if i+1 < n {
				from = all[i+1].base
			}
		default:
			firstDirty, from = i, max(cs.base, cs.s.mark.cleanedTo)
		}
	}
	return all, firstDirty, from, nil
}

// shouldClean says whether a pass is due: enough dirty bytes, a dirty part
// older than MaxCompactionLag, or tombstones or transaction markers whose
// retention is over.
func (l *Log) shouldClean(o CleanOptions, segs []cleanSeg, firstDirty int, st CleanStats) bool {
	if st.DirtyBytes > 0 && st.DirtyRatio() >= o.MinDirtyRatio {
		return true
	}
	now := l.opts.Now()
	if st.DirtyBytes > 0 && o.MaxCompactionLag > 0 {
		if ts := segs[firstDirty].s.maxTimestamp(); ts >= 0 && ts <= now.Add(-o.MaxCompactionLag).UnixMilli() {
			return true
		}
	}
	for _, cs := range segs[:firstDirty] {
		if cs.s.mark.tombstones > 0 && cs.s.mark.cleanedAt+o.DeleteRetention.Milliseconds() <= now.UnixMilli() {
			return true
		}
		if hz := cs.s.mark.horizon; hz > 0 && hz <= now.UnixMilli() {
			return true
		}
	}
	return false
}

// groupRuns splits segments into runs that each fit in one segment: total
// input bytes within segmentBytes (the output is never larger) and offsets
// within the 32-bit relative offsets of an index.
func groupRuns(segs []cleanSeg, segmentBytes int64) [][]cleanSeg {
	var runs [][]cleanSeg
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size
		for j < len(segs) && size+segs[j].size <= segmentBytes && segs[j].end-segs[i].base <= 1<<31-1 {
			size += segs[j].size
			j++
		}
		runs = append(runs, segs[i:j])
		i = j
	}
	return runs
}

func (p *cleanPass) stopped() error {
	select {
	case <-p.o.Stop:
		return errCleanStopped
	default:
		return nil
	}
}

// throttle sleeps as long as BytesPerSecond asks for the bytes moved so far.
func (p *cleanPass) throttle() {
	if p.o.BytesPerSecond <= 0 {
		return
	}
	moved := p.st.BytesRead + p.st.BytesWritten
	due := time.Duration(float64(moved) / float64(p.o.BytesPerSecond) * float64(time.Second))
	if ahead := due - time.Since(p.start); ahead > 10*time.Millisecond {
		p.o.Sleep(ahead)
	}
}

// fmtRun names a run in errors.
func fmtRun(g []cleanSeg) string {
	return fmt.Sprintf("segments [%d, %d)", g[0].base, g[len(g)-1].end)
}
