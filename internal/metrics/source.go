package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// QueueStat is one queue's (or one fan-out subscription's) state at scrape
// time. Counters are totals since the queue was created and must never go
// down while the broker runs.
type QueueStat struct {
	Queue     string
	Visible   int64         // ready to be received now
	InFlight  int64         // received, visibility not yet expired
	Delayed   int64         // sent with a delay, or nacked with one, not yet visible
	OldestAge time.Duration // age of the oldest message not yet acked; 0 when empty
	DLQDepth  int64         // messages in this queue's dead-letter queue; 0 without one

	Sent            uint64
	Received        uint64
	Acked           uint64
	Redelivered     uint64
	DeadLettered    uint64
	StaleAckRefused uint64 // acks, extends and nacks refused for a stale receipt
	Lost            uint64 // messages whose records were in damaged (quarantined) batches
	// RecoveredGap: messages found lost when the queue opened, its journal
	// ahead of its log (a live file copy, a power cut under a lax fsync).
	RecoveredGap uint64
}

// GroupStat is one consumer group's lag on one partition.
type GroupStat struct {
	Group     string
	Topic     string
	Partition int32
	// LagMessages is the high watermark minus the committed offset.
	LagMessages int64
	// LagAge is the age of the oldest record not yet consumed; 0 when caught up.
	LagAge time.Duration
}

// TopicStat is one topic's retention headroom: how long until retention
// deletes a record that the slowest group (or subscription) has not yet
// consumed, taken over all partitions. Negative means data was lost.
type TopicStat struct {
	Topic             string
	RetentionHeadroom time.Duration
}

// Source is the broker's view offered to the scrape. Each call must be cheap
// and non-blocking (a snapshot under a short lock): it runs on every scrape,
// on the scraper's clock.
type Source interface {
	QueueStats() []QueueStat
	GroupStats() []GroupStat
	TopicStats() []TopicStat
}

// SourceFuncs adapts plain functions to Source, so a broker can offer queue
// stats before it has groups; a nil func reports nothing.
type SourceFuncs struct {
	Queues func() []QueueStat
	Groups func() []GroupStat
	Topics func() []TopicStat
	// Storage, if set, reports the storage as a whole (StorageSource).
	Storage func() StorageStat
	// Compaction, if set, reports the log cleaner (CompactionSource).
	Compaction func() CompactionStats
	// Raft, if set, reports the node's Raft host (RaftSource); false: none (a single node).
	Raft func() (RaftStat, bool)
	// Txn, if set, reports the transaction coordinator's log (TxnSource); false: none.
	Txn func() (TxnStat, bool)
	// Producers, if set, reports the idempotent producers (ProducerSource).
	Producers func() ProducerStat
}

func (f SourceFuncs) QueueStats() []QueueStat { return call(f.Queues) }
func (f SourceFuncs) GroupStats() []GroupStat { return call(f.Groups) }
func (f SourceFuncs) TopicStats() []TopicStat { return call(f.Topics) }

func call[T any](fn func() []T) []T {
	if fn == nil {
		return nil
	}
	return fn()
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

// The descriptors are package-level because they are immutable and shared by
// every collector; their names are the public contract dashboards rely on.
var (
	queueMessages   = desc("queue_messages", "Messages in a queue by state: visible, inflight or delayed.", "queue", "state")
	queueOldestAge  = desc("queue_oldest_message_age_seconds", "Age of the oldest message not yet acked.", "queue")
	queueDLQDepth   = desc("queue_dlq_depth", "Messages waiting in the queue's dead-letter queue.", "queue")
	queueSent       = desc("queue_sent_total", "Messages sent to the queue.", "queue")
	queueReceived   = desc("queue_received_total", "Deliveries made from the queue, redeliveries included.", "queue")
	queueAcked      = desc("queue_acked_total", "Messages acked (deleted) with a current receipt.", "queue")
	queueRedeliv    = desc("queue_redelivered_total", "Deliveries of a message that had been delivered before.", "queue")
	queueDead       = desc("queue_dead_lettered_total", "Messages moved to the dead-letter queue after max receives.", "queue")
	queueStale      = desc("queue_stale_ack_refused_total", "Acks, extends and nacks refused because the receipt was stale.", "queue")
	queueLost       = desc("queue_lost_total", "Messages lost because their records were in a damaged batch of the log (sluice admin corruption lists it).", "queue")
	queueGap        = desc("queue_recovered_gap_messages_total", "Messages found lost when the queue opened: its cursor journal knew offsets its message log had lost (a live file copy, a power cut under --fsync interval|never). The log goes on after them.", "queue")
	groupLagMsgs    = desc("group_lag_messages", "Records between a group's committed offset and the high watermark.", "group", "topic", "partition")
	groupLagSeconds = desc("group_lag_seconds", "Age of the oldest record a group has not consumed.", "group", "topic", "partition")
	topicHeadroom   = desc("topic_retention_headroom_seconds", "Time until retention deletes a record the slowest reader has not consumed; negative means loss.", "topic")
)

// Collector is the prometheus.Collector that reads a Source at scrape time.
// Nothing is cached between scrapes: a deleted queue disappears from the next
// scrape without any unregistering.
type Collector struct{ src Source }

// NewCollector returns a Collector over src.
func NewCollector(src Source) *Collector { return &Collector{src: src} }

// RegisterSource registers a Collector over src on this registry.
func (m *Metrics) RegisterSource(src Source) error { return m.reg.Register(NewCollector(src)) }

// Describe sends every descriptor this collector may emit.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		queueMessages, queueOldestAge, queueDLQDepth, queueSent, queueReceived, queueAcked,
		queueRedeliv, queueDead, queueStale, queueLost, queueGap, groupLagMsgs, groupLagSeconds, topicHeadroom,
		storageOpenFiles, storageMaxFiles, storageEvictions, storageCorrupt, storageFailing,
		storageDiskFree, storageDiskSize, replicaPulls, replicaPullBytes, replicaPullFails, replicaPullLeft,
	} {
		ch <- d
	}
	for _, d := range compactionDescs {
		ch <- d
	}
	for _, d := range raftDescs {
		ch <- d
	}
	for _, d := range txnDescs {
		ch <- d
	}
	for _, d := range producerDescs {
		ch <- d
	}
}

// Collect snapshots the source and emits one sample per stat.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.src.QueueStats() {
		collectQueue(ch, q)
	}
	for _, g := range c.src.GroupStats() {
		p := strconv.FormatInt(int64(g.Partition), 10)
		ch <- prometheus.MustNewConstMetric(groupLagMsgs, prometheus.GaugeValue, float64(g.LagMessages), g.Group, g.Topic, p)
		ch <- prometheus.MustNewConstMetric(groupLagSeconds, prometheus.GaugeValue, g.LagAge.Seconds(), g.Group, g.Topic, p)
	}
	for _, t := range c.src.TopicStats() {
		ch <- prometheus.MustNewConstMetric(topicHeadroom, prometheus.GaugeValue, t.RetentionHeadroom.Seconds(), t.Topic)
	}
	if ss, ok := c.src.(StorageSource); ok {
		if st, ok := ss.StorageStats(); ok {
			collectStorage(ch, st)
		}
	}
	if cs, ok := c.src.(CompactionSource); ok {
		if st, ok := cs.CompactionStats(); ok {
			collectCompaction(ch, st)
		}
	}
	if rs, ok := c.src.(RaftSource); ok {
		if st, ok := rs.RaftStats(); ok {
			collectRaft(ch, st)
		}
	}
	if ts, ok := c.src.(TxnSource); ok {
		if st, ok := ts.TxnStats(); ok {
			collectTxn(ch, st)
		}
	}
	if ps, ok := c.src.(ProducerSource); ok {
		if st, ok := ps.ProducerStats(); ok {
			collectProducers(ch, st)
		}
	}
}

func collectQueue(ch chan<- prometheus.Metric, q QueueStat) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), q.Queue)
	}
	gauge(queueMessages, float64(q.Visible), q.Queue, "visible")
	gauge(queueMessages, float64(q.InFlight), q.Queue, "inflight")
	gauge(queueMessages, float64(q.Delayed), q.Queue, "delayed")
	gauge(queueOldestAge, q.OldestAge.Seconds(), q.Queue)
	gauge(queueDLQDepth, float64(q.DLQDepth), q.Queue)
	counter(queueSent, q.Sent)
	counter(queueReceived, q.Received)
	counter(queueAcked, q.Acked)
	counter(queueRedeliv, q.Redelivered)
	counter(queueDead, q.DeadLettered)
	counter(queueStale, q.StaleAckRefused)
	counter(queueLost, q.Lost)
	counter(queueGap, q.RecoveredGap)
}
