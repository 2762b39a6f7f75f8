package broker

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/journal"
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
// Snapshot body: uvarint partition count, then per partition a uvarint
// length and the cursor snapshot.
type subRT struct {
	cursorSet // partitioned: one cursor per partition
	t         *topicRT
	dir       string

	// Guarded by mu, as the cursors are.
	settings SubscriptionSettings
	ts       TopicSettings // the topic's, for the cursors' config
	parts    []*partitionRT
	next     int // partition the next receive starts at
}

func openSub(t *topicRT, s SubscriptionSettings, create bool) (*subRT, error) {
	b := t.s.b
	sub := &subRT{t: t, dir: subDir(t, s), settings: s}
	sub.partitioned = true
	sub.bind = receiptBinding{key: b.receipts, kind: receiptOfSub, id: s.ID}
	sub.ordered = func() bool { return sub.settings.KeyOrdered }
	ts, parts := t.snapshot()
	sub.parts, sub.ts = parts, ts
	if err := vfs.MkdirAllDurable(b.opts.FS, sub.dir); err != nil {
		return nil, err
	}
	key := subKey(s.Topic, s.Name)
	err := b.openMachine(&sub.machine, "subscription "+key, sub.dir, b.log.With("subscription", key), machineHooks{
		// Not sub.t.snapshot() for the config: the topic's lock is taken
		// before ours elsewhere.
		fresh: sub.freshCursors,
		loader: journal.Loader{
			Restore: sub.restoreSnapshot,
			Apply:   sub.applyRecord,
		},
		snapshot: sub.captureLocked,
		fault:    sub.cursorFault,
	})
	if err != nil {
		return nil, err
	}
	if create {
		if err := sub.startAt(); err != nil {
			sub.close()
			return nil, err
		}
	} else if err := sub.repairAhead(sub.logs()); err != nil {
		sub.close()
		return nil, err
	}
	sub.warm()
	return sub, nil
}

// logs are the partitions' logs, cursor by cursor. Called with mu held or
// before the subscription is shared.
func (sub *subRT) logs() []*storage.Log {
	logs := make([]*storage.Log, len(sub.parts))
	for i, p := range sub.parts {
		logs[i] = p.log
	}
	return logs
}

// warm reads the head of each partition into its cursor at open, one read
// each, for the reason queueRT.warm gives.
func (sub *subRT) warm() {
	sub.mu.Lock()
	now := sub.t.s.b.now()
	var recs []cursorEvent
	var errs []error
	for p := range sub.curs {
		evs, err := sub.fillReadsLocked(p, now, 1)
		recs, errs = onCursor(recs, p, evs), append(errs, err)
	}
	done := sub.recordLocked(recs)
	sub.mu.Unlock()
	if err := errors.Join(errors.Join(errs...), sub.wait(done)); err != nil {
		sub.logger.Warn("reading the partitions' heads at open", "err", err)
	}
}

// startAt positions a new subscription's cursors at the topic's end (or
// start), durably.
func (sub *subRT) startAt() error {
	sub.mu.Lock()
	var recs []cursorEvent
	for i, p := range sub.parts {
		to := p.log.HighWatermark()
		if sub.settings.FromEarliest {
			to = p.log.LogStartOffset()
		}
		recs = onCursor(recs, i, sub.curs[i].Skip(to))
	}
	done := sub.recordLocked(recs)
	sub.mu.Unlock()
	return sub.wait(done)
}

// freshCursors gives every partition a new cursor, before a load.
func (sub *subRT) freshCursors() (func(), error) {
	cfg := sub.settings.cursorConfig(sub.ts)
	old := sub.curs
	rollback := func() { sub.curs = old }
	sub.curs = make([]*queue.Cursor, len(sub.parts))
	for i := range sub.curs {
		c, err := queue.New(cfg)
		if err != nil {
			return rollback, err
		}
		sub.curs[i] = c
	}
	return rollback, nil
}

// restoreSnapshot reads the snapshot body: a uvarint cursor count, then each
// cursor's snapshot with a uvarint length.
func (sub *subRT) restoreSnapshot(rest []byte) error {
	cfg := sub.settings.cursorConfig(sub.ts)
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

// captureLocked captures every cursor for a snapshot (queue.Cursor.CaptureSnapshot); the
// encoding it returns, which the journal runs beside the subscription's lock, is a uvarint
// count, then each cursor's snapshot with a uvarint length. Called with mu held.
func (sub *subRT) captureLocked() func() ([]byte, error) {
	captured := make([]*queue.CapturedSnapshot, len(sub.curs))
	for i, c := range sub.curs {
		captured[i] = c.CaptureSnapshot()
	}
	return func() ([]byte, error) {
		body := binary.AppendUvarint(nil, uint64(len(captured)))
		for _, cs := range captured {
			snap := cs.Encode()
			body = binary.AppendUvarint(body, uint64(len(snap)))
			body = append(body, snap...)
		}
		return body, nil
	}
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
	done := sub.recordLocked([]cursorEvent{{int(p), ev}})
	sub.mu.Unlock()
	return sub.wait(done)
}

// maintain writes a snapshot if events piled up and wakes long-polls whose
// records came due.
func (sub *subRT) maintain() error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.maintainLocked(sub.t.s.b.now())
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

func (sub *subRT) close() error { return sub.machine.close() }
