package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// subRT is one open subscription: a queue cursor per partition of the
// topic, all journaled in one journal (group commit across partitions).
// A receive goes round the partitions, starting one further each call, so
// no partition starves; order holds within a partition (per key when
// KeyOrdered), never across partitions, as in Kafka.
//
// Journal record: uvarint partition, then the cursor event (package queue).
// Snapshot file: journal offset (8 bytes), CRC-32C of the rest (4 bytes),
// uvarint partition count, then per partition a uvarint length and the
// cursor snapshot.
type subRT struct {
	t   *topicRT
	dir string
	jr  *journal

	// mu guards everything below. Held for in-memory work and to submit
	// journal events in the order they were applied; never across an
	// fdatasync.
	mu       sync.Mutex
	settings SubscriptionSettings
	ts       TopicSettings // the topic's, for the cursors' config
	parts    []*partitionRT
	curs     []*queue.Cursor
	next     int           // partition the next receive starts at
	wake     chan struct{} // closed and replaced when records may be deliverable
	broken   error         // memory may be ahead of the journal; reload
}

func openSub(t *topicRT, s SubscriptionSettings, create bool) (*subRT, error) {
	o := t.s.b.opts
	sub := &subRT{t: t, dir: subDir(t, s), settings: s, wake: make(chan struct{})}
	ts, parts := t.snapshot()
	sub.parts, sub.ts = parts, ts
	if err := vfs.MkdirAllDurable(o.FS, sub.dir); err != nil {
		return nil, err
	}
	jlog, syncEach, err := t.s.b.openJournalLog(filepath.Join(sub.dir, "journal"))
	if err != nil {
		return nil, err
	}
	replayed, err := sub.load(jlog, ts)
	if err != nil {
		jlog.Close()
		return nil, err
	}
	sub.jr = newJournal(jlog, syncEach, func() int64 { return t.s.b.now().UnixMilli() },
		snapshotter{fs: o.FS, dir: sub.dir, every: o.SnapshotEvery, warn: t.s.b.log.With("subscription", subKey(s.Topic, s.Name)).Warn})
	sub.jr.replayed(replayed)
	if create {
		if err := sub.startAt(); err != nil {
			sub.close()
			return nil, err
		}
	}
	return sub, nil
}

// startAt positions a new subscription's cursors at the topic's end (or
// start), durably.
func (sub *subRT) startAt() error {
	sub.mu.Lock()
	var recs []subEvent
	for i, p := range sub.parts {
		to := p.log.HighWatermark()
		if sub.settings.FromEarliest {
			to = p.log.LogStartOffset()
		}
		recs = appendSubEvents(recs, i, sub.curs[i].Skip(to))
	}
	done := sub.recordLocked(recs)
	sub.mu.Unlock()
	return sub.wait(done)
}

// load rebuilds the cursors from the snapshot and the journal after it, and
// returns how many journal events it replayed.
func (sub *subRT) load(jlog *storage.Log, ts TopicSettings) (int, error) {
	cfg := sub.settings.cursorConfig(ts)
	sub.curs = make([]*queue.Cursor, len(sub.parts))
	from, snap, found, err := loadSnapshot(sub.t.s.b.opts.FS, sub.dir)
	if err != nil {
		return 0, err
	}
	if found {
		if err := sub.restoreSnapshot(cfg, snap); err != nil {
			return 0, err
		}
	}
	for i := range sub.curs {
		if sub.curs[i] == nil {
			if sub.curs[i], err = queue.New(cfg); err != nil {
				return 0, err
			}
		}
	}
	if from < jlog.LogStartOffset() {
		return 0, fmt.Errorf("journal starts at %d, after the snapshot's %d", jlog.LogStartOffset(), from)
	}
	n := 0
	err = replayLog(jlog, from, func(off int64, v []byte) error {
		n++
		p, k := binary.Uvarint(v)
		if k <= 0 || p >= uint64(len(sub.curs)) {
			return fmt.Errorf("journal offset %d: bad partition", off)
		}
		ev, err := queue.UnmarshalEvent(v[k:])
		if err == nil {
			err = sub.curs[p].Apply(ev)
		}
		if errors.Is(err, queue.ErrBadEvent) {
			sub.t.s.b.log.Warn("subscription journal event skipped", "offset", off, "err", err)
			return nil
		}
		return err
	})
	return n, err
}

// restoreSnapshot reads the snapshot body: a uvarint cursor count, then each
// cursor's snapshot with a uvarint length.
func (sub *subRT) restoreSnapshot(cfg queue.Config, rest []byte) error {
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(sub.curs)) {
		return fmt.Errorf("snapshot: bad partition count")
	}
	rest = rest[k:]
	for i := range int(n) {
		l, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < l {
			return fmt.Errorf("snapshot: truncated")
		}
		c, err := queue.Restore(cfg, rest[k:k+int(l)])
		if err != nil {
			return err
		}
		sub.curs[i] = c
		rest = rest[k+int(l):]
	}
	return nil
}

// subEvent is a cursor event with its partition.
type subEvent struct {
	partition int
	ev        queue.Event
}

func appendSubEvents(recs []subEvent, p int, evs []queue.Event) []subEvent {
	for _, ev := range evs {
		recs = append(recs, subEvent{p, ev})
	}
	return recs
}

// recordLocked journals events in the order applied and returns the channel
// reporting their durability. Called with mu held.
func (sub *subRT) recordLocked(recs []subEvent) <-chan error {
	for _, c := range sub.curs {
		if err := c.Fault(); err != nil && sub.broken == nil {
			// A cursor caught a bug in itself: rebuild from the journal at
			// the next operation (checkLocked) rather than trust it.
			sub.broken = err
			sub.t.s.b.log.Error("subscription cursor fault; it will be rebuilt from its journal",
				"subscription", subKey(sub.settings.Topic, sub.settings.Name), "err", err)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	enc := make([][]byte, len(recs))
	for i, r := range recs {
		b, err := r.ev.AppendBinary(binary.AppendUvarint(nil, uint64(r.partition)))
		if err != nil {
			ch := make(chan error, 1)
			ch <- err
			return ch
		}
		enc[i] = b
	}
	return sub.jr.record(enc, sub.snapshotLocked)
}

// wait waits for a journal write; a failure marks the subscription for
// reload, since memory is now ahead of disk.
func (sub *subRT) wait(ch <-chan error) error {
	if ch == nil {
		return nil
	}
	err := <-ch
	if err != nil {
		sub.mu.Lock()
		sub.broken = err
		sub.mu.Unlock()
	}
	return err
}

// checkLocked reloads the cursors from disk after a journal failure.
// Called with mu held.
func (sub *subRT) checkLocked() error {
	if sub.broken == nil {
		return nil
	}
	if err := sub.jr.log.Sync(); err != nil {
		return err
	}
	// Not sub.t.snapshot(): the topic's lock is taken before ours elsewhere.
	n, err := sub.load(sub.jr.log, sub.ts)
	if err != nil {
		return fmt.Errorf("subscription %s is unavailable after a storage failure: %w", sub.settings.Name, err)
	}
	sub.jr.reset()
	sub.jr.replayed(n)
	sub.broken = nil
	return nil
}

// snapshotLocked encodes every cursor's snapshot: a uvarint count, then
// each with a uvarint length. Called with mu held.
func (sub *subRT) snapshotLocked() ([]byte, error) {
	body := binary.AppendUvarint(nil, uint64(len(sub.curs)))
	for _, c := range sub.curs {
		snap := c.Snapshot()
		body = binary.AppendUvarint(body, uint64(len(snap)))
		body = append(body, snap...)
	}
	return body, nil
}

// notify wakes every long-poll waiting on this subscription.
func (sub *subRT) notify() {
	sub.mu.Lock()
	sub.notifyLocked()
	sub.mu.Unlock()
}

func (sub *subRT) notifyLocked() {
	close(sub.wake)
	sub.wake = make(chan struct{})
}

// floor is the lowest offset of a partition the subscription still needs.
func (sub *subRT) floor(p int32) int64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if int(p) >= len(sub.curs) {
		return 0
	}
	return sub.curs[p].Floor()
}

// expireBelow drops the subscription's records of partition p below cut,
// the topic's time-retention cut: delivered or not, they are past the
// retention, and holding them would keep the log from ever shrinking.
func (sub *subRT) expireBelow(p int32, cut int64) error {
	sub.mu.Lock()
	if int(p) >= len(sub.curs) || sub.curs[p].Floor() >= cut {
		sub.mu.Unlock()
		return nil
	}
	ev := queue.Expired{From: sub.curs[p].Floor(), To: cut}
	if err := sub.curs[p].Apply(ev); err != nil {
		sub.mu.Unlock()
		return err
	}
	done := sub.recordLocked([]subEvent{{int(p), ev}})
	sub.mu.Unlock()
	return sub.wait(done)
}

// maintain writes a snapshot if events piled up and wakes long-polls whose
// records came due.
func (sub *subRT) maintain() error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.jr.maybeSnapshot(sub.t.s.b.opts.SnapshotEvery/10, 0, sub.snapshotLocked)
	now := sub.t.s.b.now()
	for _, c := range sub.curs {
		if due, ok := c.NextDue(); ok && !due.After(now) {
			sub.notifyLocked()
			break
		}
	}
	return nil
}

// addPartitions gives the subscription cursors for new partitions; they
// start at the beginning (the partitions are new). Called with t.mu held.
func (sub *subRT) addPartitions(added []*partitionRT) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.ts = sub.t.settings
	for _, p := range added {
		c, err := queue.New(sub.settings.cursorConfig(sub.ts))
		if err != nil {
			sub.t.s.b.log.Error("subscription cursor for a new partition", "err", err)
			continue
		}
		sub.parts = append(sub.parts, p)
		sub.curs = append(sub.curs, c)
	}
	sub.notifyLocked()
}

func (sub *subRT) close() error {
	if sub.jr == nil {
		return nil
	}
	return sub.jr.close()
}
