// Package storage is the partition log: a directory of segment files holding
// Kafka RecordBatch v2 exactly as producers sent them, with sparse offset and
// time indexes, group commit, crash recovery, roll and retention.
//
// It owns the bytes of one partition directory, the promise that an
// acknowledged append survives a crash (under SyncAlways), and the promise
// that every batch it serves passed its CRC since it was written or read
// from disk: damaged batches are quarantined (quarantine.go, damage.go) and
// skipped, costing only themselves. Files are opened on demand through a
// FileCache shared by the logs of a process (filecache.go), which bounds
// the descriptors they hold. It must never know about queues, groups,
// topics or the network, never read sealed segments at Open (the scrub
// reads them later, slowly), never open a descriptor per segment, never
// serve a byte it has not checked, and never swallow an fsync error.
//
// On disk (one directory per partition; all integers big-endian):
//
//	00000000000000000000.log        batches, back to back, from base offset 0
//	00000000000000000000.index      sparse offset index
//	00000000000000000000.timeindex  sparse time index
//	00000000000000001234.log        next segment: base offset 1234 = first offset in it
//	…
//
//	.log:       | batch | batch | batch | …      each a RecordBatch v2 (see package batch):
//	            | baseOffset 8 | batchLength 4 | leaderEpoch 4 | magic=2 1 | crc32c 4 | attributes… records |
//
//	.index:     | relOffset uint32 | position uint32 |  × n   one entry per IndexIntervalBytes of log;
//	                                                       batch base+relOffset starts at position
//	.timeindex: | timestamp int64 | relOffset uint32 | × n   one with each .index entry: every batch
//	                                                       before base+relOffset has maxTimestamp <=
//	                                                       timestamp; a sealed segment's last entry is
//	                                                       its max timestamp at the next segment's base,
//	                                                       then a seal trailer (index.go) with the
//	                                                       CRC-32C of both index files
//	quarantine.json                 damaged byte ranges no longer served, if any
//	00000000000000000000.compacted  the cleaner wrote this segment: its offsets may skip (clean_marker.go)
//	cleaner.swap, *.swap            a clean being swapped in (clean_swap.go)
//
// Index entries are written only once the data they point at is synced, so
// recovery can start from the last one: Open scans the active segment from
// its last valid index entry, truncates a torn tail (or quarantines damage
// in the middle, recover.go says how it tells them apart), and reads
// nothing of the sealed segments but their sizes and the last time-index
// entries.
//
// Appends are group-committed (commit.go): under SyncAlways appenders place
// batches in memory and one syncer goroutine per Log, started by the first
// append and stopped when idle, writes and fdatasyncs each group.
// docs/storage.md states what each sync policy can lose.
//
// The cleaner (clean.go) compacts sealed segments for compacted topics:
// the latest record per key, written to new segments under temporary
// names and swapped in through cleaner.swap, which Open finishes or rolls
// back (clean_swap.go). It never touches the active segment and never
// decides which topics are compacted: the broker asks.
package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Sentinel errors, wrapped with %w.
var (
	// ErrOffsetOutOfRange: the offset is below the log start or above the
	// high watermark.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("storage: log closed")
	// ErrNeedsRecovery: an fdatasync or undo failed; the log refuses appends
	// until it is closed and opened again (which runs recovery).
	ErrNeedsRecovery = errors.New("storage: log needs recovery (reopen it)")
	// ErrTruncated: TruncateSuffix removed the batches an Append was waiting on.
	ErrTruncated = errors.New("storage: appended batches were truncated")
	// ErrTooLarge: an append would overflow a segment's 32-bit positions.
	ErrTooLarge = errors.New("storage: append too large")
)

// CorruptionError reports damaged bytes inside a segment. Everything before
// Position is still served.
type CorruptionError struct {
	Path     string // segment file
	Offset   int64  // the offset being read when the damage was found
	Position int64  // byte position of the damaged batch in Path
	Err      error

	want int64 // the offset the damaged batch should start with
	// A header walk reports damage where a header is wrong, but a damaged
	// length before it can make the walk land on a good batch with the
	// wrong offset: from (holding fromWant) is where the walk started, for
	// a full check of the batches up to the damage. Equal to Position for
	// damage found by a full check.
	from, fromWant int64
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("storage: corrupt segment %s at position %d (offset %d): %v", e.Path, e.Position, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// Log is one partition's log. All methods are safe for concurrent use.
type Log struct {
	opts Options
	env  *segEnv
	// segBytes is the roll size now: opts.SegmentBytes until
	// SetSegmentBytes (segment_bytes.go).
	segBytes atomic.Int64

	// wmu serializes writers: it guards active, next, wbuf, and the size and
	// index of the active segment. Lock order: wmu, syncMu, mu, segment.ix, stateMu.
	wmu       sync.Mutex
	active    *segment
	next      int64 // offset the next batch gets (log end offset)
	wbuf      []byte
	ahead     int64   // SyncAheadBytes: bytes written since the last background sync was started
	pend      pending // SyncAlways: batches placed but not yet written to the file
	pendPos   int64   // file position of pend[0]
	pendStart int64   // offset of the first pending batch

	// syncMu serializes writes of the pending buffer and fdatasyncs with
	// rolls and truncations, and guards the fields below. Held from taking
	// the pending buffer until its sync is published, so buffers reach the
	// file in order.
	syncMu      sync.Mutex
	syncedNext  int64         // everything below is durable
	writeFailed *writeFailure // a group write failed; repair before the next write

	// mu guards segs and the lifetime of segment files: files are closed or
	// removed only under mu.Lock, readers do positional reads under RLock.
	mu     sync.RWMutex
	segs   []*segment
	closed bool

	// stateMu guards the published state: what readers and waiters see.
	stateMu sync.Mutex
	hwCh    chan struct{} // closed and replaced whenever hw, failed or closed change
	failed  error         // first fatal error; appends fail with it
	gen     int64         // incremented whenever placed batches are dropped
	drops   []drop        // the latest increments of gen
	hw      atomic.Int64  // high watermark; written under stateMu
	start   atomic.Int64  // log start offset; written under mu
	moved   int64         // the start DeleteRecords moved to, kept in startFile or not (startDirty); 0 if none; under mu
	// startDirty: RaiseStart moved the start (moved) and startFile does not say so yet
	// (PersistStartUpTo writes it); kept is what startFile says (0: none). Under mu.
	startDirty bool
	kept       int64

	closing atomic.Bool    // set by Close: appends fail with ErrClosed
	kick    chan struct{}  // wakes the syncer (capacity 1: kicks coalesce)
	stop    chan struct{}  // closed by Close to stop the background goroutine
	bg      sync.WaitGroup // the background goroutine, while it runs
	syncing atomic.Bool    // SyncAlways: the syncer runs (it stops when idle)

	cleanMu sync.Mutex // one Clean pass at a time (clean.go)

	bgMu      sync.Mutex // serializes starting the syncer with Close
	bgStopped bool       // Close has stopped the background goroutine
}

// Open opens or creates the log in opts.Dir and recovers its tail.
func Open(opts Options) (*Log, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	q := &quarantine{fs: opts.FS, dir: opts.Dir, files: opts.Files, logger: opts.Logger, obs: opts.Observer, now: opts.Now}
	l := &Log{
		opts: opts,
		env: &segEnv{fs: opts.FS, dir: opts.Dir, interval: int64(opts.IndexIntervalBytes), prealloc: opts.PreallocateBytes,
			maxBatch: opts.MaxBatchBytes, logger: opts.Logger, files: opts.Files, q: q},
		hwCh: make(chan struct{}),
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}
	l.segBytes.Store(opts.SegmentBytes)
	if err := l.openSegments(); err != nil {
		for _, s := range l.segs {
			s.close()
		}
		return nil, err
	}
	l.syncedNext = l.next
	l.hw.Store(l.next)
	l.start.Store(min(l.startAfterDrop(), l.next))
	l.startBackground()
	if l.needsScrub() {
		opts.Files.scrub.add(l)
	}
	return l, nil
}

// startBackground starts the ticker of SyncInterval. The syncer of
// SyncAlways starts with the first append (ensureSyncer) and stops when
// the log is idle.
func (l *Log) startBackground() {
	if l.opts.Sync.Mode == SyncInterval {
		l.bg.Add(1)
		t := time.NewTicker(l.opts.Sync.Interval)
		go l.syncLoop(t)
	}
}

// openSegments lists the directory, opens every segment without reading it,
// and recovers the last one.
func (l *Log) openSegments() error {
	fs, dir := l.opts.FS, l.opts.Dir
	if err := vfs.MkdirAllDurable(fs, dir); err != nil {
		return fmt.Errorf("storage: open %s: %w", dir, err)
	}
	if err := recoverSwap(fs, dir); err != nil {
		return err
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", dir, err)
	}
	logs, marked := map[int64]bool{}, map[int64]bool{}
	var bases []int64
	for _, n := range names {
		if b, ok := parseSegmentName(n, logSuffix); ok {
			logs[b] = true
			bases = append(bases, b) // List is sorted and names are fixed-width
		}
		if b, ok := parseSegmentName(n, markerSuffix); ok {
			marked[b] = true
		}
	}
	l.removeOrphans(names, logs)
	if err := l.readStart(); err != nil {
		return err
	}
	if err := l.env.q.load(names); err != nil {
		return err
	}
	now := l.opts.Now()
	if len(bases) == 0 {
		s, err := createSegment(l.env, 0, now)
		if err != nil {
			return err
		}
		l.segs, l.active = []*segment{s}, s
		return nil
	}
	for _, b := range bases {
		s, err := openSegment(l.env, b, now)
		if err != nil {
			return err
		}
		if marked[b] {
			s.loadMarker(now.UnixMilli())
		}
		l.segs = append(l.segs, s)
	}
	for i, s := range l.segs[:len(l.segs)-1] {
		s.sealedNext = l.segs[i+1].base
		if ts, ok := readLastTime(l.opts.Files, fs, s.path(timeIndexSuffix), s.sealedNext-s.base); ok {
			s.index.maxTS, s.index.maxTSKnown = ts, true
		}
	}
	l.env.q.attach(l.segs)
	l.active = l.segs[len(l.segs)-1]
	next, err := l.active.recover()
	if err != nil {
		return err
	}
	l.next = next
	l.active.preallocate()
	return nil
}

// removeOrphans deletes index files whose .log is gone: the leftovers of a
// segment deletion cut short by a crash.
func (l *Log) removeOrphans(names []string, logs map[int64]bool) {
	for _, n := range names {
		for _, suf := range []string{indexSuffix, timeIndexSuffix, markerSuffix} {
			if b, ok := parseSegmentName(n, suf); ok && !logs[b] {
				l.opts.FS.Remove(filepath.Join(l.env.dir, n))
			}
		}
	}
}

// HighWatermark is the offset after the last acknowledged batch: reads see
// everything below it.
func (l *Log) HighWatermark() int64 { return l.hw.Load() }

// LogStartOffset is the first offset still stored.
func (l *Log) LogStartOffset() int64 { return l.start.Load() }

// Err returns the error that made the log refuse appends (matching
// ErrNeedsRecovery), or nil: for health checks, and to know when to reopen.
func (l *Log) Err() error { return l.failure() }

// Size is the total bytes of the log's segments, for metrics and retention
// reports.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := int64(0)
	for _, s := range l.segs {
		n += s.size.Load()
	}
	return n
}

// SkipDamaged returns the first offset at or after off that is not inside
// a quarantined range: a reader whose Read at off returned nothing although
// off is below the high watermark (the rest of the log is a damaged range)
// moves on there instead of reading the same offset forever.
func (l *Log) SkipDamaged(off int64) int64 {
	for moved := true; moved; {
		moved = false
		for _, q := range l.Quarantined() {
			if q.FirstOffset <= off && off <= q.LastOffset {
				off, moved = q.LastOffset+1, true
			}
		}
	}
	return off
}

// SegmentSizes lists the log's segments, oldest first: each one's base
// offset and its size in bytes of data (never the zeros a preallocating
// file holds ahead of its appends, which a stat of the file would count).
func (l *Log) SegmentSizes() (bases, sizes []int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		bases, sizes = append(bases, s.base), append(sizes, s.size.Load())
	}
	return bases, sizes
}

// Quarantined lists the damaged batches the log has found and no longer
// serves, oldest segment first (for `sluice admin corruption`). The list is
// durable: it survives a restart, and shrinks only when retention or a
// truncation removes the bytes it names.
func (l *Log) Quarantined() []QuarantinedBatch { return l.env.q.list() }

// QuarantinedThrough reports whether offset lies in a quarantined range — offsets of
// damaged batches, never served again — and the last offset of that range: a reader at
// offset may step past it (a Kafka consumer is sent an empty batch spanning it, as
// compaction leaves them, since at the end of the log no later batch would move it on).
func (l *Log) QuarantinedThrough(offset int64) (int64, bool) {
	for _, q := range l.env.q.list() {
		if q.FirstOffset <= offset && offset <= q.LastOffset {
			return q.LastOffset, true
		}
	}
	return 0, false
}

// LastStableOffset equals the high watermark: there are no transactions yet.
func (l *Log) LastStableOffset() int64 { return l.hw.Load() }

// Close syncs what was written, stops the background goroutine and closes
// every file. Appends waiting for a sync get its outcome.
func (l *Log) Close() error {
	if l.closing.Swap(true) {
		return ErrClosed
	}
	// Wait for writers in flight, without holding wmu while the syncer
	// might need it.
	l.waitWriters()
	l.bgMu.Lock()
	l.bgStopped = true
	l.bgMu.Unlock()
	close(l.stop)
	l.bg.Wait()
	err := l.syncOnce()
	if err == nil {
		// Index entries may be written only once the data is synced.
		l.wmu.Lock()
		err = l.active.seal(l.next, true)
		l.wmu.Unlock()
	}
	l.opts.Files.scrub.remove(l)
	l.mu.Lock()
	for _, s := range l.segs {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}
	l.closed = true
	l.mu.Unlock()
	l.stateMu.Lock()
	l.notifyLocked()
	l.stateMu.Unlock()
	return err
}

// waitWriters returns once no writer holds wmu: any writer that took it
// before Close set closing has finished writing.
func (l *Log) waitWriters() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_ = l.next // nothing to do: acquiring the lock is the barrier
}

// Wait returns when HighWatermark() > offset, the context ends, or the log
// closes: the long-poll of a consumer at the end of the log.
func (l *Log) Wait(ctx context.Context, offset int64) error {
	for {
		l.stateMu.Lock()
		hw, ch, failed := l.hw.Load(), l.hwCh, l.failed
		l.stateMu.Unlock()
		if hw > offset {
			return nil
		}
		if l.closing.Load() {
			return ErrClosed
		}
		if failed != nil {
			return failed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// validate checks every batch before anything is written. Beyond
// batch.Validate, an appended batch must hold records numbered 0…n-1: the
// log assigns n offsets to it, and a batch claiming more offsets than it has
// records (as compaction leaves them) would burn offsets for nothing.
func (l *Log) validate(batches [][]byte) error {
	for i, b := range batches {
		err := batch.Validate(b, l.opts.MaxBatchBytes)
		if h, _ := batch.ParseHeader(b); err == nil && (h.RecordCount < 1 || h.LastOffsetDelta != h.RecordCount-1) {
			err = &batch.Error{Reason: fmt.Sprintf("%d records with lastOffsetDelta %d", h.RecordCount, h.LastOffsetDelta), Err: batch.ErrCorrupt}
		}
		if err != nil {
			return fmt.Errorf("storage: batch %d of %d: %w", i, len(batches), err)
		}
	}
	return nil
}
