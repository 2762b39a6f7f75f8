package broker

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// CreateQueue creates a queue, or returns the existing one's settings when a
// queue of that name exists with the same settings (as SQS's CreateQueue is
// idempotent). Zero settings take their defaults.
func (b *Broker) CreateQueue(s QueueSettings) (QueueSettings, error) {
	s.Normalize()
	if err := s.Validate(); err != nil {
		return QueueSettings{}, err
	}
	if b.cluster != nil {
		return b.cluster.createQueue(s) // the catalog's (cluster_queues.go)
	}
	b.queueAdmin.Lock()
	defer b.queueAdmin.Unlock()
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return QueueSettings{}, ErrClosed
	}
	if _, ok := b.unavailable[s.Name]; ok {
		return QueueSettings{}, fmt.Errorf("%w: %s", ErrQueueUnavailable, s.Name)
	}
	if q := b.queues[s.Name]; q != nil {
		cur := *q.settings()
		if !sameSettings(cur, s) {
			return QueueSettings{}, fmt.Errorf("%w: %s", ErrQueueExists, s.Name)
		}
		return cur, nil
	}
	if err := b.checkDeadLetterTarget(s); err != nil {
		return QueueSettings{}, err
	}
	if err := b.disk.Admit(); err != nil {
		return QueueSettings{}, err
	}
	now := b.now()
	s.CreatedAt, s.ModifiedAt = now, now
	id, err := b.cat.allocID()
	if err != nil {
		return QueueSettings{}, b.disk.Note(err)
	}
	s.ID = id
	// The directory, journal and settings are written (about ten fsyncs)
	// holding queueAdmin only; mu is taken just to publish the queue.
	q, err := createEntity(b, queueDir(b.opts.Dir, s), s, func() (*queueRT, error) { return openQueue(b, s) })
	if err != nil {
		return QueueSettings{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		// Close has taken its list of queues meanwhile and will not see
		// this one: close it here. It is durable, so a retry after the restart finds it.
		if cerr := q.close(); cerr != nil {
			b.log.Warn("closing a queue created during shutdown", "queue", s.Name, "err", cerr)
		}
		return QueueSettings{}, ErrClosed
	}
	b.queues[s.Name] = q
	return s.clone(), nil
}

// createEntity makes a queue, topic or subscription in the catalog's
// order: open makes its directory and files, then its settings are written,
// the last step (a directory without them is garbage, see catalog). If
// either fails, nothing of it stays behind; the error is as the disk guard
// sees it.
func createEntity[T interface{ close() error }](b *Broker, dir string, settings any, open func() (T, error)) (T, error) {
	x, err := open()
	if err == nil {
		if err = b.cat.put(dir, settings); err != nil {
			x.close()
		}
	}
	if err != nil {
		if rerr := vfs.RemoveAll(b.opts.FS, dir); rerr != nil {
			b.log.Warn("removing what a failed create left", "dir", dir, "err", rerr)
		}
		var none T
		return none, b.disk.Note(err)
	}
	return x, nil
}

// checkDeadLetterTarget requires s's dead-letter queue to exist and to be of
// the same kind: a FIFO queue's dead letters go to a FIFO queue (so they keep
// their group order there), a standard queue's to a standard queue. Called
// with b.queueAdmin (or b.mu) held.
func (b *Broker) checkDeadLetterTarget(s QueueSettings) error {
	if s.DeadLetterQueue == "" {
		return nil
	}
	dlq := b.queues[s.DeadLetterQueue]
	if dlq == nil {
		return fmt.Errorf("%w: dead-letter queue %s", ErrQueueNotFound, s.DeadLetterQueue)
	}
	fifo := dlq.settings().FIFO
	if fifo != s.FIFO {
		return invalid("dead_letter_queue", "%s: a FIFO queue's dead-letter queue must be FIFO, and a standard queue's standard", s.DeadLetterQueue)
	}
	return nil
}

// sameSettings compares the settings a creator chooses (not ids or times).
func sameSettings(a, b QueueSettings) bool {
	a.ID, a.CreatedAt, a.ModifiedAt, a.Tags, a.Extra = 0, time.Time{}, time.Time{}, nil, nil
	b.ID, b.CreatedAt, b.ModifiedAt, b.Tags, b.Extra = 0, time.Time{}, time.Time{}, nil, nil
	return reflect.DeepEqual(a, b)
}

// GetQueue returns a queue's settings.
func (b *Broker) GetQueue(name string) (QueueSettings, error) {
	if b.cluster != nil && b.cluster.clusteredQueue(name) {
		return b.cluster.getQueue(name)
	}
	q, err := b.queue(name)
	if err != nil {
		return QueueSettings{}, err
	}
	return q.settings().clone(), nil
}

// UpdateQueue changes a queue's settings with fn. The name, FIFO-ness and
// identity cannot change. In-flight deliveries keep their deadlines.
func (b *Broker) UpdateQueue(name string, fn func(*QueueSettings)) (QueueSettings, error) {
	if b.cluster != nil && b.cluster.clusteredQueue(name) {
		return b.cluster.updateQueue(name, fn)
	}
	b.queueAdmin.Lock()
	defer b.queueAdmin.Unlock()
	q := b.queues[name]
	if q == nil {
		return QueueSettings{}, fmt.Errorf("%w: %s", ErrQueueNotFound, name)
	}
	if q.settings().FIFO {
		// No FIFO send between its dedup check and its record while the
		// deduplication rules change (reconfigureLocked).
		q.sendMu.Lock()
		defer q.sendMu.Unlock()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	cur := q.settings()
	next := cur.clone()
	fn(&next)
	next.Name, next.ID, next.FIFO, next.CreatedAt = cur.Name, cur.ID, cur.FIFO, cur.CreatedAt
	next.Normalize()
	if err := next.Validate(); err != nil {
		return QueueSettings{}, err
	}
	if err := b.checkDeadLetterTarget(next); err != nil {
		return QueueSettings{}, err
	}
	next.ModifiedAt = b.now()
	if err := b.cat.put(q.dir, next); err != nil {
		return QueueSettings{}, b.disk.Note(err)
	}
	if err := q.reconfigureLocked(next); err != nil {
		return QueueSettings{}, err
	}
	return next.clone(), nil
}

// DeleteQueue deletes a queue and its messages. A queue that is another
// queue's dead-letter target cannot be deleted until that link is removed.
func (b *Broker) DeleteQueue(name string) error {
	if b.cluster != nil && b.cluster.clusteredQueue(name) {
		return b.cluster.deleteQueue(name)
	}
	b.queueAdmin.Lock()
	defer b.queueAdmin.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed // Close owns the queues now
	}
	q := b.queues[name]
	_, unavailable := b.unavailable[name]
	if q == nil && !unavailable {
		return fmt.Errorf("%w: %s", ErrQueueNotFound, name)
	}
	for other, oq := range b.queues {
		target := oq.settings().DeadLetterQueue
		if other != name && target == name {
			return fmt.Errorf("%w: %s is the dead-letter queue of %s", ErrQueueInUse, name, other)
		}
	}
	if subs := b.SubscriptionsDeadLetteringTo(name); len(subs) > 0 {
		return fmt.Errorf("%w: %s is the dead-letter queue of subscription %s", ErrQueueInUse, name, subs[0])
	}
	if unavailable {
		return b.deleteUnavailableLocked(name)
	}
	if err := b.cat.drop(q.dir); err != nil {
		return err
	}
	delete(b.queues, name)
	q.mu.Lock()
	q.notifyLocked()
	q.mu.Unlock()
	if err := q.close(); err != nil {
		b.log.Warn("closing deleted queue", "queue", name, "err", err)
	}
	// The catalog no longer names the directory; removing it is cleanup.
	return vfs.RemoveAll(b.opts.FS, q.dir)
}

// deleteUnavailableLocked deletes a queue that could not be opened: its
// catalog entry and its directory. Called with b.mu held.
func (b *Broker) deleteUnavailableLocked(name string) error {
	u := b.unavailable[name]
	if err := b.cat.drop(u.dir); err != nil {
		return err
	}
	delete(b.unavailable, name)
	b.log.Warn("unavailable queue deleted", "queue", name)
	return vfs.RemoveAll(b.opts.FS, u.dir)
}

// PurgeQueue finishes every message sent before now: buffered, delayed and
// in flight alike (their receipts become stale).
func (b *Broker) PurgeQueue(ctx context.Context, name string) error {
	if b.cluster != nil && b.cluster.clusteredQueue(name) {
		return b.cluster.purgeQueue(ctx, name)
	}
	q, err := b.queue(name)
	if err != nil {
		return err
	}
	if err := q.lockChecked(); err != nil {
		return err
	}
	evs := q.cur().Purge(q.now(), q.log.HighWatermark())
	done := q.journalLocked(evs)
	q.mu.Unlock()
	return q.wait(done)
}

// TagQueue and friends keep front-end data with the queue's settings.
func (b *Broker) SetQueueTags(name string, set map[string]string, remove []string) error {
	_, err := b.UpdateQueue(name, func(s *QueueSettings) {
		if s.Tags == nil {
			s.Tags = map[string]string{}
		}
		maps.Copy(s.Tags, set)
		for _, k := range remove {
			delete(s.Tags, k)
		}
	})
	return err
}

// UnavailableQueues lists the queues that could not be opened at start,
// sorted.
func (b *Broker) UnavailableQueues() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]string, 0, len(b.unavailable))
	for n := range b.unavailable {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
