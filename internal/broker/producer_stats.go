package broker

// ProducerStats is what /metrics reports of the idempotent producers (metrics.ProducerStat).
type ProducerStats struct {
	// Remembered counts the producer ids remembered over the partitions this node holds
	// (a producer writing to n partitions counts n times): each costs memory, a snapshot's
	// bytes, and in a cluster every replicated checkpoint's.
	Remembered int64
	// Expired counts the producers forgotten after --producer-id-expiration since start
	// (a cluster node: by the forget entries it applied, as a leader or a follower).
	Expired uint64
}

// ProducerStats walks every partition this node holds; one lock per partition, briefly.
func (b *Broker) ProducerStats() ProducerStats {
	st := ProducerStats{Expired: b.producersExpired.Load()}
	if b.streams == nil {
		return st
	}
	for _, t := range b.streams.topicList() {
		_, parts := t.snapshot()
		for _, p := range parts {
			st.Remembered += int64(p.prod.Len())
		}
	}
	return st
}
