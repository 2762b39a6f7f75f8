package broker

import (
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
)

// QueueStats is a point-in-time view of a queue, or of a subscription (a
// queue cursor per partition of its topic, summed), in the seeds'
// vocabulary.
type QueueStats struct {
	Topic     string // a subscription's topic; empty for a queue
	Name      string
	Visible   int64 // ready to be received now (including FIFO messages behind their group)
	InFlight  int64 // received, visibility not over
	Delayed   int64 // waiting out a send or nack delay
	OldestAge time.Duration
	// DLQDepth is the number of messages waiting in the dead-letter queue
	// (0 without one).
	DLQDepth int64

	// Sent counts a queue's sends; a subscription's records are produced
	// to its topic, so it stays 0 there. Every counter but StaleRefused
	// survives restarts (they are rebuilt from the log and the journal);
	// StaleRefused counts since the broker started, as a refusal changes
	// nothing durable.
	Sent, Received, Redelivered, Acked, DeadLettered, Expired, StaleRefused uint64
	// Lost counts messages whose records were in damaged batches of the log
	// (quarantined by storage, so never delivered again), from the log's
	// durable quarantine list.
	Lost uint64
	// RecoveredGap counts, since the broker started, the messages found
	// lost when the queue opened because its journal knew offsets its
	// message log had lost (a live file copy, a power cut under --fsync
	// interval|never; docs/storage.md, "Journal ahead of the log").
	RecoveredGap uint64
}

// Depth is every message not yet finished.
func (s QueueStats) Depth() int64 { return s.Visible + s.InFlight + s.Delayed }

// QueueStats reports one queue's stats.
func (b *Broker) QueueStats(name string) (QueueStats, error) {
	if b.cluster != nil && b.cluster.clusteredQueue(name) {
		return b.cluster.queueStats(name)
	}
	q, err := b.queue(name)
	if err != nil {
		return QueueStats{}, err
	}
	st := q.stats()
	b.addDLQDepth(&st, q.settings().DeadLetterQueue)
	return st, nil
}

// SubscriptionStats reports one subscription's stats.
func (b *Broker) SubscriptionStats(topic, name string) (QueueStats, error) {
	if c := b.clusterTopic(topic); c != nil {
		return c.subStats(topic, name) // cluster_subs.go
	}
	_, sub, err := b.subscription(topic, name)
	if err != nil {
		return QueueStats{}, err
	}
	st := sub.stats()
	sub.mu.Lock()
	dlq := sub.settings.DeadLetterQueue
	sub.mu.Unlock()
	b.addDLQDepth(&st, dlq)
	return st, nil
}

func (b *Broker) addDLQDepth(st *QueueStats, dlqName string) {
	if dlqName == "" {
		return
	}
	if dlq, err := b.queue(dlqName); err == nil {
		st.DLQDepth = dlq.stats().Depth()
	}
}

// AllQueueStats reports every queue's stats (for metrics at scrape time).
func (b *Broker) AllQueueStats() []QueueStats {
	var out []QueueStats
	for _, n := range b.ListQueues("") {
		if st, err := b.QueueStats(n); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// AllSubscriptionStats reports every subscription's stats (for metrics).
func (b *Broker) AllSubscriptionStats() []QueueStats {
	var out []QueueStats
	for _, t := range b.streams.topicList() {
		subs, _ := b.ListSubscriptions(t.name)
		for _, s := range subs {
			if st, err := b.SubscriptionStats(t.name, s.Name); err == nil {
				out = append(out, st)
			}
		}
	}
	return out
}

func (q *queueRT) stats() QueueStats {
	st := q.sumStats(q.now, func() []*storage.Log { return []*storage.Log{q.log} })
	// One record per message, offsets from 0: the log's end counts every
	// message ever sent, across restarts.
	st.Name, st.Sent = q.name, uint64(q.log.HighWatermark())
	return st
}

func (sub *subRT) stats() QueueStats {
	// parts is read with mu held: partitions added meanwhile come with cursors.
	st := sub.sumStats(sub.t.s.b.now, sub.logs)
	st.Topic, st.Name = sub.t.name, sub.settings.Name
	return st
}

// sumStats sums the cursors' stats; logs, called with mu held, gives the
// log each cursor reads.
func (cs *cursorSet) sumStats(now func() time.Time, logs func() []*storage.Log) QueueStats {
	cs.mu.Lock()
	t := now()
	ls := logs()
	st := QueueStats{StaleRefused: cs.ctr.staleRefused, RecoveredGap: cs.ctr.recoveredGap}
	var oldest time.Time
	type unread struct {
		log   *storage.Log
		floor int64
	}
	var inLog []unread
	for i, c := range cs.curs {
		s := c.Stats(t)
		st.Visible += max(0, ls[i].HighWatermark()-c.ReadPos()) + int64(s.Ready+s.Blocked)
		st.InFlight += int64(s.InFlight)
		st.Delayed += int64(s.Delayed)
		st.Received += s.Receives
		st.Redelivered += s.Redeliveries
		st.DeadLettered += s.DeadLettered
		st.Expired += s.Expired
		st.Acked += s.Acks
		switch {
		case !s.OldestSentAt.IsZero():
			oldest = earliest(oldest, s.OldestSentAt)
		case c.ReadPos() < ls[i].HighWatermark():
			inLog = append(inLog, unread{ls[i], c.ReadPos()})
		}
	}
	cs.mu.Unlock()
	for _, l := range ls {
		for _, q := range l.Quarantined() {
			st.Lost += uint64(max(0, q.LastOffset-q.FirstOffset+1))
		}
	}
	// A cursor that holds no undelayed message: its oldest is the first it
	// has not read yet, whose time is in the log, read without the lock.
	for _, u := range inLog {
		oldest = earliest(oldest, sentAt(u.log, max(u.floor, u.log.LogStartOffset())))
	}
	if !oldest.IsZero() && st.Depth() > 0 {
		st.OldestAge = max(0, t.Sub(oldest))
	}
	return st
}

// earliest is the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// sentAt is the timestamp of the record at off, or zero. For a batch over
// 256 KiB it reads only the header and answers the batch's first timestamp,
// an upper bound on the age, to keep stats and lag reports cheap.
func sentAt(log *storage.Log, off int64) time.Time {
	sec, err := log.ReadSection(off, 1)
	if err != nil || sec.Length == 0 {
		return time.Time{}
	}
	if sec.Length > 256<<10 {
		buf := make([]byte, batch.HeaderSize)
		if _, err := sec.File.ReadAt(buf, sec.Position); err != nil {
			return time.Time{}
		}
		h, err := batch.ParseHeader(buf)
		if err != nil {
			return time.Time{}
		}
		return time.UnixMilli(h.BaseTimestamp)
	}
	data, err := log.Read(off, 1)
	if err != nil {
		return time.Time{}
	}
	var t time.Time
	_ = eachRecord(data, func(r batch.Record) bool {
		if r.Offset >= off {
			t = time.UnixMilli(r.Timestamp)
			return false
		}
		return true
	})
	return t
}
