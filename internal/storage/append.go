package storage

import (
	"context"
	"fmt"
	"math"

	"github.com/sluice-mq/sluice/internal/batch"
)

// Append validates every batch (nothing is written if any is bad), assigns
// consecutive offsets, writes them, and returns each batch's base offset once
// they are durable under the sync policy. The caller's slices are not
// modified: the log stamps offsets into its own copy.
//
// If ctx ends while waiting for the sync, Append returns ctx.Err() and the
// batches may or may not become visible: the outcome is unknown, as with a
// lost network answer.
func (l *Log) Append(ctx context.Context, batches ...[]byte) ([]int64, error) {
	if err := l.validate(batches); err != nil {
		return nil, err
	}
	return l.append(ctx, batches, false, 0)
}

// AppendCopied is Append for batches copied whole from another log at the offsets they
// had there (a cluster replica refilling from a peer): batches a cleaner rewrote, holding
// fewer records than offsets or none, are accepted as the source stored them, and each
// keeps its span of offsets. The caller lays them end to end from this log's end (the
// gaps between a cleaned log's batches filled with empty batches, batch.Rebuild), so the
// log itself never skips an offset. Every batch is checked as Append checks it (framing,
// CRC, records in order within its span) but for the record count.
func (l *Log) AppendCopied(ctx context.Context, batches ...[]byte) ([]int64, error) {
	for i, b := range batches {
		if err := batch.Validate(b, l.opts.MaxBatchBytes); err != nil {
			return nil, fmt.Errorf("storage: batch %d of %d: %w", i, len(batches), err)
		}
	}
	return l.append(ctx, batches, false, 0)
}

// AppendEpoch is Append that also stamps each batch's partitionLeaderEpoch
// (outside the CRC): the leader epoch for Kafka, the Raft term later.
func (l *Log) AppendEpoch(ctx context.Context, epoch int32, batches ...[]byte) ([]int64, error) {
	c, err := l.Check(batches...)
	if err != nil {
		return nil, err
	}
	return l.AppendChecked(ctx, epoch, c)
}

// append writes batches that validate accepted (Append, AppendChecked).
func (l *Log) append(ctx context.Context, batches [][]byte, setEpoch bool, epoch int32) ([]int64, error) {
	if len(batches) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := l.place(batches, setEpoch, epoch, anyGen)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Placed is an append whose batches have their offsets and are on their
// way to the disk (PlaceChecked); Wait says when they are durable.
type Placed struct {
	l        *Log
	offsets  []int64
	end, gen int64
	done     chan struct{} // the commit group's; nil unless SyncAlways
}

// PlaceChecked is AppendChecked without the wait: it assigns offsets,
// stamps the epoch and queues the batches for the next group commit (or,
// under a policy other than SyncAlways, writes them), and returns at once;
// Placed.Wait waits for the disk. Offsets follow the order of the calls,
// so a caller with a stream of appends places each one as it comes and
// waits for the earlier ones meanwhile, in order: the next batches join
// the group being filled while the previous group is synced, instead of
// waiting for its answer before they even reach the log.
func (l *Log) PlaceChecked(epoch int32, c Checked) (Placed, error) {
	if c.log != l && len(c.batches) > 0 {
		return Placed{}, errForeignChecked
	}
	if len(c.batches) == 0 {
		return Placed{}, nil
	}
	return l.place(c.batches, true, epoch, anyGen)
}

// anyGen is place's wantGen for a caller that places at whatever generation the log is at.
const anyGen = -1

// place writes batches (queues them for the next group under SyncAlways). With a
// wantGen other than anyGen it places nothing and returns ErrGenerationChanged unless
// the log is still at that generation: under wmu, which every drop holds, the check
// and the placement are one step.
func (l *Log) place(batches [][]byte, setEpoch bool, epoch int32, wantGen int64) (Placed, error) {
	l.wmu.Lock()
	if wantGen != anyGen && l.Gen() != wantGen {
		l.wmu.Unlock()
		return Placed{}, ErrGenerationChanged
	}
	offsets, end, gen, err := l.writeLocked(batches, setEpoch, epoch)
	done := l.pend.done
	ahead := err == nil && l.syncAhead(batches)
	l.wmu.Unlock()
	if err != nil {
		return Placed{}, err
	}
	if l.opts.Sync.Mode != SyncAlways {
		if ahead {
			l.kickSyncer()
		}
		return Placed{offsets: offsets}, nil
	}
	l.kickSyncer()
	return Placed{l: l, offsets: offsets, end: end, gen: gen, done: done}, nil
}

// Offsets are the placed batches' base offsets, known before they are
// durable (never answer them to anyone before Wait returned nil).
func (p Placed) Offsets() []int64 { return p.offsets }

// Wait returns the batches' base offsets once they are durable under the
// sync policy, or why they will never be (a failed write or sync, a
// truncation). If ctx ends first it returns ctx.Err() and the batches may
// or may not become visible: the outcome is unknown, as with a lost
// network answer.
func (p Placed) Wait(ctx context.Context) ([]int64, error) {
	if p.l == nil {
		return p.offsets, nil
	}
	if err := p.l.waitDurable(ctx, p.end, p.gen, p.done, false); err != nil {
		return nil, err
	}
	return p.offsets, nil
}

// kickSyncer asks the syncer for a sync, starting it if it is not running.
func (l *Log) kickSyncer() {
	select {
	case l.kick <- struct{}{}:
	default: // a sync is already requested; it will cover us
	}
	l.ensureSyncer()
}

// syncAhead counts batches just written under SyncNever and reports whether
// SyncAheadBytes were reached since the last background sync was asked for
// (the count then starts over). Called with wmu held.
func (l *Log) syncAhead(batches [][]byte) bool {
	if l.opts.Sync.Mode != SyncNever || l.opts.SyncAheadBytes <= 0 {
		return false
	}
	for _, b := range batches {
		l.ahead += int64(len(b))
	}
	if l.ahead < l.opts.SyncAheadBytes {
		return false
	}
	l.ahead = 0
	return true
}

// writeLocked places the batches at the end of the active segment, rolling
// first if needed: under SyncAlways into the pending buffer the syncer
// writes, otherwise straight into the file (a failed or short write is cut
// back so the log stays a sequence of whole batches). Called with wmu held.
func (l *Log) writeLocked(batches [][]byte, setEpoch bool, epoch int32) (offsets []int64, end, gen int64, err error) {
	if l.closing.Load() {
		return nil, 0, 0, ErrClosed
	}
	if err := l.failure(); err != nil {
		return nil, 0, 0, err
	}
	total, count := 0, int64(0)
	for _, b := range batches {
		h, _ := batch.ParseHeader(b)
		total += len(b)
		count += int64(h.LastOffsetDelta) + 1
	}
	if err := l.maybeRoll(int64(total), count); err != nil {
		return nil, 0, 0, err
	}
	seg := l.active
	if err := seg.unseal(); err != nil {
		return nil, 0, 0, err
	}
	pos := seg.size.Load()
	if pos+int64(total) > math.MaxUint32 || l.next+count-seg.base > math.MaxUint32 {
		return nil, 0, 0, fmt.Errorf("%w: %d bytes at position %d", ErrTooLarge, total, pos)
	}
	offsets = make([]int64, len(batches))
	if l.opts.Sync.Mode == SyncAlways {
		// Group commit: the syncer writes everything pending with one
		// write(2) right before its fdatasync. Appenders never enter the
		// kernel, so they neither pay a syscall each nor wait on pages the
		// running sync is writing back.
		if l.pend.size == 0 {
			l.pendPos, l.pendStart = pos, l.next
		}
		next := l.pend.add(batches, offsets, l.next, setEpoch, epoch)
		l.commitWritten(seg, batches, offsets, pos, next)
	} else {
		buf, next := stamp(l.wbuf[:0], batches, offsets, l.next, setEpoch, epoch)
		if cap(buf) <= 4<<20 {
			l.wbuf = buf // reuse small buffers; let big ones go
		}
		if err := l.writeSegment(seg, pos, buf); err != nil {
			return nil, 0, 0, err
		}
		l.commitWritten(seg, batches, offsets, pos, next)
		l.publish(seg, pos+int64(len(buf)), next)
	}
	l.stateMu.Lock()
	gen = l.gen
	l.stateMu.Unlock()
	return offsets, l.next, gen, nil
}

// stamp appends the batches to dst with consecutive base offsets from next
// (and the epoch if set), filling offsets; it returns the offset after them.
func stamp(dst []byte, batches [][]byte, offsets []int64, next int64, setEpoch bool, epoch int32) ([]byte, int64) {
	for i, b := range batches {
		start := len(dst)
		dst = append(dst, b...)
		batch.SetBaseOffset(dst[start:], next)
		if setEpoch {
			batch.SetLeaderEpoch(dst[start:], epoch)
		}
		h, _ := batch.ParseHeader(b)
		offsets[i] = next
		next += int64(h.LastOffsetDelta) + 1
	}
	return dst, next
}

// commitWritten records batches placed at pos (in the file or pending):
// index entries, the log end, the segment's logical size.
func (l *Log) commitWritten(seg *segment, batches [][]byte, offsets []int64, pos, next int64) {
	size := pos
	seg.ix.Lock()
	for i, b := range batches {
		h, _ := batch.ParseHeader(b)
		seg.index.note(uint32(offsets[i]-seg.base), size, int64(len(b)), h.MaxTimestamp)
		size += int64(len(b))
	}
	seg.ix.Unlock()
	l.next = next
	seg.size.Store(size)
}

// writeSegment writes buf at the end of seg (at pos). A failed or short
// write (ENOSPC, EIO) is undone by truncating back to pos: the log stays
// consistent and a later append can succeed once space is freed. If even the
// undo fails the log needs recovery.
//
// The file is pinned for the whole write, so a failure to open it (the
// cache had closed it) writes nothing and needs no undo.
func (l *Log) writeSegment(seg *segment, pos int64, bufs ...[]byte) error {
	f, err := seg.log.acquire()
	if err != nil {
		return fmt.Errorf("storage: append to %s: %w", seg.path(logSuffix), err)
	}
	defer seg.log.release()
	for _, buf := range bufs {
		var n int
		if n, err = f.Write(buf); err == nil && n != len(buf) {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(buf))
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		return nil
	}
	werr := fmt.Errorf("storage: append to %s: %w", seg.path(logSuffix), err)
	if terr := f.Truncate(pos); terr != nil {
		l.fail(fmt.Errorf("%w: undo of a failed write: %w (write: %v)", ErrNeedsRecovery, terr, err))
	}
	return werr
}

// maybeRoll starts a new segment when the active one is non-empty and the
// append would pass SegmentBytes, it is older than SegmentAge, or its
// relative offsets would overflow.
func (l *Log) maybeRoll(total, count int64) error {
	seg := l.active
	size := seg.size.Load()
	if size == 0 {
		return nil
	}
	full := size+total > l.segBytes.Load()
	old := l.opts.Now().Sub(seg.created) >= l.opts.SegmentAge
	wide := l.next+count-seg.base > math.MaxInt32
	if !full && !old && !wide {
		return nil
	}
	return l.roll()
}

// roll seals the active segment and starts a new one at l.next. The old
// segment is synced before the new one exists, so a crash can never leave a
// newer segment after an older one that lost its tail (a gap in offsets).
// Called with wmu held.
func (l *Log) roll() error { return l.rollTo(l.next) }

// rollTo is roll with the new segment based at base >= l.next: the offsets
// in between hold no batch (SkipTo). Called with wmu held.
func (l *Log) rollTo(base int64) error {
	old := l.active
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	// Pinned from the last write to its fdatasync: a descriptor closed in
	// between could take a writeback error with it (fsyncgate).
	f, err := old.log.acquire()
	if err != nil {
		return fmt.Errorf("storage: roll %s: %w", old.path(logSuffix), err)
	}
	defer old.log.release()
	if err := l.flushPendingLocked(); err != nil {
		return err
	}
	// Sealed segments are always synced, whatever the policy: recovery
	// scans only the last segment, so every other one must be whole. It
	// costs one fdatasync per segment. Preallocated zeros are cut first:
	// a sealed segment's size is its file's size.
	if err := old.trimPrealloc(); err != nil {
		l.fail(fmt.Errorf("%w: trim %s before sealing: %w", ErrNeedsRecovery, old.path(logSuffix), err))
		return l.failure()
	}
	if err := f.Sync(); err != nil {
		l.fail(fmt.Errorf("%w: fdatasync %s: %w", ErrNeedsRecovery, old.path(logSuffix), err))
		return l.failure()
	}
	l.syncedNext = l.next
	l.publish(old, old.size.Load(), l.next)
	ns, err := createSegment(l.env, base, l.opts.Now())
	if err != nil {
		return err // nothing changed: the old segment stays active
	}
	// Sealed at the new base, which is what Open takes for its end (the
	// next segment's base), so the seal matches on the next open.
	if err := old.seal(base, true); err != nil {
		l.opts.Logger.Warn("storage: sync of sealed index failed; it will be rebuilt if damaged", "segment", old.path(logSuffix), "err", err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, ns)
	l.mu.Unlock()
	l.active = ns
	return nil
}
