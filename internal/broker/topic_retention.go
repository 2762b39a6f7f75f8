package broker

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
		off, err := p.log.OffsetForTime(b.now().Add(-s.Retention).UnixMilli())
		switch {
		case err != nil:
		case off < 0:
			cut = p.log.HighWatermark() // every record is older
		default:
			cut = max(cut, off)
		}
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
	for _, p := range parts {
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
		p.prod.Expire(p.log.LogStartOffset())
		p.txn.expire(p.log.LogStartOffset())
		if err := p.txn.maybeSnapshot(p.log, t.s.b.opts.FS, p.dir, false); err != nil && firstErr == nil {
			firstErr = err
		}
		if err := p.prod.MaybeSnapshot(p.log, t.s.b.opts.FS, p.dir, false); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}
