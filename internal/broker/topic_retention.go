package broker

import (
	"sync"
	"time"
)

// Retention of a topic is applied here rather than by storage.ApplyRetention
// because subscriptions may still hold messages past it: each partition
// deletes below min(retention cut, every subscription's floor).

// sizeBytes is the partition's size: bytes of data in its segments.
func (p *partitionRT) sizeBytes() int64 { return p.log.Size() }

// retentionCut returns the offsets below which the topic's retention would
// delete: timeCut for records older than the retention time, cut for that
// and the oldest segments while the partition is over its size limit.
func (t *topicRT) retentionCut(p *partitionRT, s TopicSettings) (timeCut, cut int64) {
	b := t.s.b
	cut = p.log.LogStartOffset()
	if cut == p.log.HighWatermark() || !s.Deletes() {
		// cleanup.policy=compact: the cleaner, not retention, bounds the log.
		// Nothing stored: nothing to delete, and no segment to read (a node of a
		// thousand idle partitions spent a fifth of its idle CPU here).
		return cut, cut
	}
	if s.Retention > 0 {
		// At most the log's end: a replica's log cut back (Restore) may end
		// below a cut computed before.
		cut = max(cut, min(p.retention.timeCut(p, s.Retention, b.now()), p.log.HighWatermark()))
	}
	timeCut = cut
	if s.RetentionBytes > 0 {
		// Data sizes, not file sizes: a stat would count the zeros an
		// active segment holds ahead of its appends, and retention would
		// delete a segment up to --preallocate early.
		bases, sizes := p.log.SegmentSizes()
		total := int64(0)
		for _, sz := range sizes {
			total += sz
		}
		for i := 0; i+1 < len(bases) && total-sizes[i] >= s.RetentionBytes; i++ {
			total -= sizes[i]
			cut = max(cut, bases[i+1])
		}
	}
	return timeCut, cut
}

// retentionCache keeps a partition's time cut between maintenance passes.
// Computing it reads the segment that holds the cut (storage's
// OffsetForTime), once a second for every partition that holds anything:
// a fifth of an idle node's CPU with a thousand partitions (docs/
// benchmarks.md, "Idle: 1,000 partitions, quiesced"). A cut computed a
// moment ago is still a cut (what it keeps is kept a little longer, never
// deleted early), so it is computed again only every hundredth of the
// retention, at most every minute (Kafka looks every 5 minutes,
// log.retention.check.interval.ms), or when the retention changed.
type retentionCache struct {
	mu        sync.Mutex
	at        time.Time // when cut was computed; zero: never
	retention time.Duration
	cut       int64 // -1: unknown (the log could not say)
}

// retentionEvery is how long a time cut is reused under retention r.
func retentionEvery(r time.Duration) time.Duration { return min(r/100, time.Minute) }

// timeCut is the offset below which every record is older than retention
// (-1 if the log could not say), computed again when the cached one is
// older than retentionEvery.
func (rc *retentionCache) timeCut(p *partitionRT, retention time.Duration, now time.Time) int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.at.IsZero() && rc.retention == retention && !now.Before(rc.at) && now.Sub(rc.at) < retentionEvery(retention) {
		return rc.cut
	}
	off, err := p.log.OffsetForTime(now.Add(-retention).UnixMilli())
	switch {
	case err != nil:
		off = -1
	case off < 0:
		off = p.log.HighWatermark() // every record is older
	}
	rc.at, rc.retention, rc.cut = now, retention, off
	return off
}

// maintain applies retention to every partition, keeping what a
// subscription still holds, and runs the subscriptions' upkeep.
func (t *topicRT) maintain() error {
	s, parts := t.snapshot()
	t.mu.RLock()
	subs := make([]*subRT, 0, len(t.subs))
	for _, sub := range t.subs {
		subs = append(subs, sub)
	}
	t.mu.RUnlock()
	var firstErr error
	for _, sub := range subs {
		if err := sub.maintain(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	replicated := t.s.b.cluster != nil && s.UUID != ([16]byte{}) // a catalog topic (cluster_retention.go)
	for _, p := range parts {
		if replicated {
			// The leader's trims move every replica's start, forget its producers
			// and expire its cursors, all in log order; nothing here may.
			t.retainReplicated(p, s)
			continue
		}
		timeCut, cut := t.retentionCut(p, s)
		for _, sub := range subs {
			// Records past the time retention expire from subscriptions
			// too; below the size limit a subscription holds what it has
			// not finished.
			if err := sub.expireBelow(p.index, timeCut); err != nil && firstErr == nil {
				firstErr = err
			}
			cut = min(cut, sub.floor(p.index))
		}
		if _, err := p.log.DeleteBelow(cut); err != nil && firstErr == nil {
			firstErr = err
		}
		if start := p.log.LogStartOffset(); p.expiredBelow.Swap(start) != start {
			// Only when the start moved: both walk every producer or transaction.
			p.prod.Expire(start)
			p.txn.expire(start)
		}
		if idle := p.prod.IdleSince(t.s.b.now(), t.s.b.opts.ProducerIDExpiration, p.txn.hasOpen); len(idle) > 0 {
			n := len(p.prod.Forget(idle))
			t.s.b.producersExpired.Add(uint64(n))
			t.s.b.log.Debug("idle producers forgotten", "topic", p.topic, "partition", p.index, "producers", n)
		}
		if err := p.txn.maybeSnapshot(p.log, t.s.b.opts.FS, p.dir, false); err != nil && firstErr == nil {
			firstErr = err
		}
		if err := p.prod.MaybeSnapshot(p.log, t.s.b.opts.FS, p.dir, false); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}
