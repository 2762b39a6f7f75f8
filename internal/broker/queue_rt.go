package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/journal"
	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/storage"
)

// queueRT is one open queue: its message log, and its cursor with the
// journal that makes it durable (cursorSet, with one cursor).
type queueRT struct {
	cursorSet
	b    *Broker
	name string
	dir  string
	log  *storage.Log // messages

	// sendMu serialises the dedup check and the append of FIFO sends, so a
	// deduplication id is remembered only for a message that was stored.
	sendMu sync.Mutex
	// groups combines concurrent standard sends (queue_sendgroup.go).
	groups sendGroups

	// current holds the settings; see settings.
	current atomic.Pointer[QueueSettings]

	// Guarded by mu (cursorSet's machine), as the cursor is.
	dedup *queue.Deduper // FIFO queues only
	cache *recentCache   // messages about to be delivered, as sent
	// ahead is a log read done for the next fill without the lock, and
	// readingAhead says one is under way (see planReadAheadLocked).
	ahead        *fillRead
	readingAhead bool
}

// cur is the queue's cursor. Called with mu held.
func (q *queueRT) cur() *queue.Cursor { return q.curs[0] }

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
	q := &queueRT{b: b, name: s.Name, dir: dir}
	q.bind = receiptBinding{key: b.receipts, kind: receiptOfQueue, id: s.ID}
	q.current.Store(&s)
	q.ordered = func() bool { return q.settings().FIFO }
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
	q.finished = func(evs []queue.Event) { q.cache.forgetFinished(evs) }
	err = b.openMachine(&q.machine, "queue "+s.Name, dir, b.log.With("queue", s.Name), machineHooks{
		fresh: func() (func(), error) {
			c, err := queue.New(q.settings().cursorConfig())
			old := q.curs
			q.curs = []*queue.Cursor{c}
			return func() { q.curs = old }, err
		},
		loader: journal.Loader{
			Restore: func(snap []byte) error {
				c, err := queue.Restore(q.settings().cursorConfig(), snap)
				if err == nil {
					q.curs[0] = c
				}
				return err
			},
			Apply: q.applyRecord,
		},
		snapshot: q.captureLocked,
		fault:    q.cursorFault,
		reloaded: func() { q.ahead = nil },
	})
	if err != nil {
		q.log.Close()
		return nil, err
	}
	q.cache = newRecentCache(min(q.cur().Config().Lookahead, maxRecentCacheSlots))
	if err := q.repairAhead([]*storage.Log{q.log}); err != nil {
		q.close()
		return nil, err
	}
	if s.FIFO {
		if err := q.rebuildDedup(); err != nil {
			q.close()
			return nil, err
		}
	}
	q.warm()
	return q, nil
}

// journalLocked journals events of the queue's cursor (in the order
// applied) and returns a channel that reports their durability. Called with
// mu held.
func (q *queueRT) journalLocked(evs []queue.Event) <-chan error {
	return q.recordLocked(onCursor(nil, 0, evs))
}

// captureLocked captures the cursor for a snapshot (queue.Cursor.CaptureSnapshot: a copy
// of what is in flight), whose encoding the journal runs beside the queue's lock. Called
// with q.mu held.
func (q *queueRT) captureLocked() func() ([]byte, error) {
	captured := q.cur().CaptureSnapshot()
	return func() ([]byte, error) { return captured.Encode(), nil }
}

// maintain deletes message segments every message of which is finished,
// writes a snapshot if events piled up, and wakes long-polls whose messages
// came due.
func (q *queueRT) maintain() error {
	q.mu.Lock()
	now := q.now()
	q.cache.forgetOlder(now.Add(-recentCacheAge))
	floor := q.cur().Floor()
	q.maintainLocked(now)
	q.mu.Unlock()
	_, err := q.log.DeleteBelow(floor)
	return err
}

func (q *queueRT) close() error {
	return errors.Join(q.machine.close(), q.log.Close())
}

// now is the broker clock.
func (q *queueRT) now() time.Time { return q.b.now() }

// reconfigureLocked applies new settings: the cursor is rebuilt from its own
// snapshot under the new config, so deliveries in flight keep their state.
// Called with q.mu held.
func (q *queueRT) reconfigureLocked(s QueueSettings) error {
	cur, err := queue.Restore(s.cursorConfig(), q.cur().Snapshot())
	if err != nil {
		return err
	}
	if old := q.settings(); s.FIFO && (s.DedupWindow != old.DedupWindow || s.DedupScope != old.DedupScope) {
		// The ids sent within the new window, keyed by the new scope,
		// read back from the log (sends wait: UpdateQueue holds sendMu).
		d, err := q.loadDedup(s)
		if err != nil {
			return err
		}
		q.dedup = d
	}
	q.curs[0] = cur
	q.current.Store(&s)
	q.notifyLocked()
	return nil
}
