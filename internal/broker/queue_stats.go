package broker

import (
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// QueueStats is a point-in-time view of a queue, in the seeds' vocabulary.
type QueueStats struct {
	Name      string
	Visible   int64 // ready to be received now (including FIFO messages behind their group)
	InFlight  int64 // received, visibility not over
	Delayed   int64 // waiting out a send or nack delay
	OldestAge time.Duration
	// DLQDepth is the number of messages waiting in this queue's dead-letter
	// queue (0 without one).
	DLQDepth int64

	Sent, Received, Redelivered, Acked, DeadLettered, Expired, StaleRefused uint64
}

// Depth is every message not yet finished.
func (s QueueStats) Depth() int64 { return s.Visible + s.InFlight + s.Delayed }

// QueueStats reports one queue's stats.
func (b *Broker) QueueStats(name string) (QueueStats, error) {
	q, err := b.queue(name)
	if err != nil {
		return QueueStats{}, err
	}
	st := q.stats()
	dlqName := q.settings().DeadLetterQueue
	if dlqName != "" {
		if dlq, err := b.queue(dlqName); err == nil {
			st.DLQDepth = dlq.stats().Depth()
		}
	}
	return st, nil
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

func (q *queueRT) stats() QueueStats {
	q.mu.Lock()
	now := q.now()
	cs := q.cur.Stats(now)
	backlog := max(0, q.log.HighWatermark()-q.cur.ReadPos())
	floor := q.cur.Floor()
	st := QueueStats{
		Name:    q.name,
		Visible: backlog + int64(cs.Ready+cs.Blocked), InFlight: int64(cs.InFlight), Delayed: int64(cs.Delayed),
		Sent: q.ctr.sent, Received: cs.Receives, Redelivered: cs.Redeliveries, Acked: q.ctr.acked,
		DeadLettered: cs.DeadLettered, Expired: cs.Expired, StaleRefused: q.ctr.staleRefused,
	}
	oldest := cs.OldestSentAt
	q.mu.Unlock()
	if oldest.IsZero() && floor < q.log.HighWatermark() {
		oldest = q.sentAtOf(floor)
	}
	if !oldest.IsZero() && st.Depth() > 0 {
		st.OldestAge = max(0, now.Sub(oldest))
	}
	return st
}

// sentAtOf reads the timestamp of the record at off, or zero.
func (q *queueRT) sentAtOf(off int64) time.Time {
	data, err := q.log.Read(off, 1)
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
