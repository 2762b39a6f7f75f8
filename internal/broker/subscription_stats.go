package broker

import "time"

// SubscriptionStats is a point-in-time view of a subscription, summed over
// the topic's partitions; the fields mean what QueueStats' do.
type SubscriptionStats struct {
	Topic, Name string
	Visible     int64 // produced and not yet received, or due again
	InFlight    int64
	Delayed     int64
	OldestAge   time.Duration // age of the oldest unfinished record
	DLQDepth    int64

	Received, Redelivered, DeadLettered, Expired uint64
}

// Depth is every record not yet finished.
func (s SubscriptionStats) Depth() int64 { return s.Visible + s.InFlight + s.Delayed }

// SubscriptionStats reports one subscription's stats.
func (b *Broker) SubscriptionStats(topic, name string) (SubscriptionStats, error) {
	_, sub, err := b.subscription(topic, name)
	if err != nil {
		return SubscriptionStats{}, err
	}
	st := sub.stats()
	if dlqName := sub.settings.DeadLetterQueue; dlqName != "" {
		if dlq, err := b.queue(dlqName); err == nil {
			st.DLQDepth = dlq.stats().Depth()
		}
	}
	return st, nil
}

// AllSubscriptionStats reports every subscription's stats (for metrics).
func (b *Broker) AllSubscriptionStats() []SubscriptionStats {
	var out []SubscriptionStats
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

func (sub *subRT) stats() SubscriptionStats {
	sub.mu.Lock()
	now := sub.t.s.b.now()
	st := SubscriptionStats{Topic: sub.t.name, Name: sub.settings.Name}
	var oldest time.Time
	var floors []int64
	for i, c := range sub.curs {
		cs := c.Stats(now)
		backlog := max(0, sub.parts[i].log.HighWatermark()-c.ReadPos())
		st.Visible += backlog + int64(cs.Ready+cs.Blocked)
		st.InFlight += int64(cs.InFlight)
		st.Delayed += int64(cs.Delayed)
		st.Received += cs.Receives
		st.Redelivered += cs.Redeliveries
		st.DeadLettered += cs.DeadLettered
		st.Expired += cs.Expired
		if !cs.OldestSentAt.IsZero() && (oldest.IsZero() || cs.OldestSentAt.Before(oldest)) {
			oldest = cs.OldestSentAt
		}
		floors = append(floors, c.Floor())
	}
	parts := sub.parts
	sub.mu.Unlock()
	// Records at a floor the cursor has not read yet: their time is in the log.
	for i, f := range floors {
		if f < parts[i].log.HighWatermark() {
			if ts := firstTimestamp(parts[i], max(f, parts[i].log.LogStartOffset())); ts >= 0 {
				if t := time.UnixMilli(ts); oldest.IsZero() || t.Before(oldest) {
					oldest = t
				}
			}
		}
	}
	if !oldest.IsZero() && st.Depth() > 0 {
		st.OldestAge = max(0, now.Sub(oldest))
	}
	return st
}
