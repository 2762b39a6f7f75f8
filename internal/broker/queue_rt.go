package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// queueRT is one open queue: its message log, its cursor and the journal
// that makes the cursor durable.
type queueRT struct {
	b    *Broker
	name string
	dir  string
	log  *storage.Log // messages
	jr   *journal     // cursor events

	// sendMu serialises the dedup check and the append of FIFO sends, so a
	// deduplication id is remembered only for a message that was stored.
	sendMu sync.Mutex

	// current holds the settings; see settings.
	current atomic.Pointer[QueueSettings]

	// mu guards everything below. It is held for in-memory work and to
	// submit journal events in the order they were applied; never across
	// an fdatasync, except for the rare dead-letter copy.
	mu    sync.Mutex
	cur   *queue.Cursor
	dedup *queue.Deduper // FIFO queues only
	cache *recentCache   // messages about to be delivered, as sent
	// ahead is a log read done for the next fill without the lock, and
	// readingAhead says one is under way (see planReadAheadLocked).
	ahead        *fillRead
	readingAhead bool
	wake         chan struct{} // closed and replaced when messages may have become visible
	broken       error         // set when memory may be ahead of disk; the queue reloads
	ctr          runtimeCounters
}

// runtimeCounters are totals since the broker started (not durable).
type runtimeCounters struct {
	sent, acked, staleRefused uint64
}

// queueIndexIntervalBytes is the index interval of queue message logs.
const queueIndexIntervalBytes = 32 << 10

// settings returns the queue's settings. Nothing modifies them in place:
// reconfigureLocked (with q.mu held) replaces them whole, so a reader needs no
// lock, and a send, which every receive and ack would otherwise hold up,
// takes none.
func (q *queueRT) settings() *QueueSettings { return q.current.Load() }

func queueDir(root string, s QueueSettings) string {
	return filepath.Join(root, "queues", fmt.Sprintf("%d-%s", s.ID, s.Name))
}

func (s QueueSettings) cursorConfig() queue.Config {
	return queue.Config{
		Visibility:   s.VisibilityTimeout,
		MaxExtension: s.MaxExtension,
		MaxReceives:  s.MaxReceives,
		FIFO:         s.FIFO,
		Retention:    s.Retention,
	}
}

func openQueue(b *Broker, s QueueSettings) (*queueRT, error) {
	dir := queueDir(b.opts.Dir, s)
	q := &queueRT{b: b, name: s.Name, dir: dir, wake: make(chan struct{})}
	q.current.Store(&s)
	var err error
	lo := b.logOptions(filepath.Join(dir, "log"), b.opts.SegmentBytes)
	lo.MaxBatchBytes = 8 << 20 // a send batch of up to ten 1 MiB messages plus headers
	// The cursor reads a queue's log front to back, so a sparse index does:
	// 32 bytes of memory per 32 KiB of log instead of per 4 KiB, and a
	// lookup walks at most 32 KiB of batch headers.
	lo.IndexIntervalBytes = queueIndexIntervalBytes
	q.log, err = storage.Open(lo)
	if err != nil {
		return nil, err
	}
	jlog, syncEach, err := b.openJournalLog(filepath.Join(dir, "journal"))
	if err != nil {
		q.log.Close()
		return nil, err
	}
	replayed, err := q.loadCursor(jlog)
	if err != nil {
		q.log.Close()
		jlog.Close()
		return nil, err
	}
	q.jr = newJournal(jlog, syncEach, func() int64 { return b.now().UnixMilli() },
		snapshotter{fs: b.opts.FS, dir: dir, every: b.opts.SnapshotEvery, warn: b.log.With("queue", s.Name).Warn})
	q.jr.replayed(replayed)
	q.cache = newRecentCache(min(q.cur.Config().Lookahead, maxRecentCacheSlots))
	if s.FIFO {
		if err := q.rebuildDedup(); err != nil {
			q.close()
			return nil, err
		}
	}
	return q, nil
}

// loadCursor rebuilds the cursor from the snapshot and the journal after it,
// and returns how many journal events it replayed.
func (q *queueRT) loadCursor(jlog *storage.Log) (int, error) {
	cfg := q.settings().cursorConfig()
	from, snap, found, err := loadSnapshot(q.b.opts.FS, q.dir)
	switch {
	case err != nil:
		return 0, err
	case found:
		q.cur, err = queue.Restore(cfg, snap)
	default:
		q.cur, err = queue.New(cfg)
	}
	if err != nil {
		return 0, err
	}
	if from < jlog.LogStartOffset() {
		return 0, fmt.Errorf("journal starts at %d, after the snapshot's %d: events are missing", jlog.LogStartOffset(), from)
	}
	n, skipped := 0, 0
	err = replayLog(jlog, from, func(off int64, v []byte) error {
		ev, err := queue.UnmarshalEvent(v)
		if err == nil {
			err = q.cur.Apply(ev)
		}
		n++
		if errors.Is(err, queue.ErrBadEvent) {
			// An event that no longer fits (say, a dead-letter journaled
			// after a purge of the same message) is logged and skipped:
			// refusing to open the queue would lose everything else.
			skipped++
			q.b.log.Warn("journal event skipped", "queue", q.name, "offset", off, "err", err)
			return nil
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("journal replay: %w", err)
	}
	return n, nil
}

// reload throws the in-memory cursor away and rebuilds it from disk. It runs
// after a failure that may have left memory ahead of the journal. Called with
// q.mu held.
func (q *queueRT) reloadLocked() error {
	if err := q.jr.log.Sync(); err != nil {
		return err
	}
	n, err := q.loadCursor(q.jr.log)
	if err != nil {
		return err
	}
	q.jr.reset()
	q.jr.replayed(n)
	q.ahead = nil
	q.broken = nil
	q.b.log.Warn("queue state reloaded from its journal after a write failure", "queue", q.name)
	return nil
}

// record journals events (in the order applied) and returns a channel that
// reports their durability. Called with q.mu held.
func (q *queueRT) recordLocked(evs []queue.Event) <-chan error {
	if err := q.cur.Fault(); err != nil && q.broken == nil {
		// The cursor caught a bug in itself: rebuild it from the journal
		// at the next operation (checkLocked) rather than trust it.
		q.broken = err
		q.b.log.Error("queue cursor fault; it will be rebuilt from its journal", "queue", q.name, "err", err)
	}
	if len(evs) == 0 {
		return nil
	}
	q.cache.forgetFinished(evs)
	enc := make([][]byte, len(evs))
	for i, ev := range evs {
		b, err := ev.MarshalBinary()
		if err != nil {
			ch := make(chan error, 1)
			ch <- err
			return ch
		}
		enc[i] = b
	}
	return q.jr.record(enc, q.snapshotLocked)
}

// snapshotLocked is the cursor's snapshot. Called with q.mu held.
func (q *queueRT) snapshotLocked() ([]byte, error) { return q.cur.Snapshot(), nil }

// wait waits for a journal write; a failure marks the queue for reload, since
// memory is now ahead of disk.
func (q *queueRT) wait(ch <-chan error) error {
	if ch == nil {
		return nil
	}
	err := <-ch
	if err != nil {
		q.mu.Lock()
		q.broken = err
		q.mu.Unlock()
	}
	return err
}

// notifyLocked wakes every long-poll waiting on this queue.
func (q *queueRT) notifyLocked() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// maintain deletes message segments every message of which is finished,
// writes a snapshot if events piled up, and wakes long-polls whose messages
// came due.
func (q *queueRT) maintain() error {
	q.mu.Lock()
	q.cache.forgetOlder(q.b.now().Add(-recentCacheAge))
	floor := q.cur.Floor()
	q.jr.maybeSnapshot(q.b.opts.SnapshotEvery/10, 0, q.snapshotLocked)
	if due, ok := q.cur.NextDue(); ok && !due.After(q.b.now()) {
		q.notifyLocked()
	}
	q.mu.Unlock()
	_, err := q.log.DeleteBelow(floor)
	return err
}

func (q *queueRT) close() error {
	var errs []error
	if q.jr != nil {
		errs = append(errs, q.jr.close())
	}
	errs = append(errs, q.log.Close())
	return errors.Join(errs...)
}

// now is the broker clock.
func (q *queueRT) now() time.Time { return q.b.now() }

// reconfigureLocked applies new settings: the cursor is rebuilt from its own
// snapshot under the new config, so deliveries in flight keep their state.
// Called with q.mu held.
func (q *queueRT) reconfigureLocked(s QueueSettings) error {
	cur, err := queue.Restore(s.cursorConfig(), q.cur.Snapshot())
	if err != nil {
		return err
	}
	if s.FIFO && s.DedupWindow != q.settings().DedupWindow {
		d, err := queue.NewDeduper(s.DedupWindow)
		if err != nil {
			return err
		}
		q.dedup = d // ids recorded under the old window are forgotten
	}
	q.cur = cur
	q.current.Store(&s)
	q.notifyLocked()
	return nil
}

// removeAll deletes dir and everything under it.
func removeAll(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := fsys.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			err = removeAll(fsys, p)
		} else {
			err = fsys.Remove(p)
		}
		if err != nil {
			return err
		}
	}
	return fsys.Remove(dir)
}
