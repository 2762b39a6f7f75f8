package broker

import (
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/producer"
)

// UpdateTopic changes a topic's configs (retention, retention bytes,
// maximum message size, cleanup policy) with fn, which may refuse by
// returning an error. The name, id, creation time and partition count
// cannot change here (AddPartitions grows the count). The new settings are
// validated as at creation and persisted before they take effect; with
// dryRun they are only validated. On any error nothing changes.
//
// A lower retention takes effect at the next maintenance pass; a lower
// maximum message size applies to batches produced from now on (stored
// ones stay readable).
func (b *Broker) UpdateTopic(name string, dryRun bool, fn func(*TopicSettings) error) (TopicSettings, error) {
	if b.cluster != nil && !dryRun {
		return b.cluster.updateTopic(name, fn)
	}
	return b.updateTopicLocal(name, dryRun, fn)
}

func (b *Broker) updateTopicLocal(name string, dryRun bool, fn func(*TopicSettings) error) (TopicSettings, error) {
	st := b.streams
	st.admin.Lock()
	defer st.admin.Unlock()
	t, err := st.topic(name)
	if err != nil {
		return TopicSettings{}, err
	}
	cur, _ := t.snapshot()
	next := cur
	if err := fn(&next); err != nil {
		return TopicSettings{}, err
	}
	next.Name, next.ID, next.CreatedAt, next.Partitions = cur.Name, cur.ID, cur.CreatedAt, cur.Partitions
	next.UUID, next.Replication = cur.UUID, cur.Replication
	next.normalize()
	if err := next.validate(); err != nil {
		return TopicSettings{}, err
	}
	if dryRun || next == cur {
		return next, nil
	}
	if err := b.disk.Admit(); err != nil {
		return TopicSettings{}, err
	}
	if err := b.cat.put(t.dir, next); err != nil {
		return TopicSettings{}, b.disk.Note(err)
	}
	t.mu.Lock()
	t.settings = next
	parts := t.parts
	t.mu.Unlock()
	if next.SegmentBytes != cur.SegmentBytes {
		for _, p := range parts {
			if err := p.log.SetSegmentBytes(b.segmentBytes(next)); err != nil {
				b.log.Warn("segment.bytes not applied", "topic", name, "partition", p.index, "err", err)
			}
		}
	}
	return next, nil
}

// segmentBytes is the segment size of a topic's partition logs: its own
// segment.bytes, else the broker's.
func (b *Broker) segmentBytes(s TopicSettings) int64 {
	if s.SegmentBytes > 0 {
		return s.SegmentBytes
	}
	return b.opts.SegmentBytes
}

// DefaultSegmentBytes is the segment size of topics that set none
// (--segment-bytes): DescribeConfigs' segment.bytes for them.
func (b *Broker) DefaultSegmentBytes() int64 { return b.opts.SegmentBytes }

// maxMessageBytes is the topic's current limit on a produced batch.
func (t *topicRT) maxMessageBytes() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.settings.MaxMessageBytes
}

// logMaxBatchBytes is what a topic's partition logs accept: the largest
// limit a topic may have, so that raising max.message.bytes needs no
// reopen and lowering it never makes stored batches look oversized to
// recovery; ProduceBatches applies the topic's own limit.
const logMaxBatchBytes = MaxTopicMessageBytes

// TopicsDir is the directory under which every topic's logs live: Kafka's
// one log dir, for DescribeLogDirs.
func (b *Broker) TopicsDir() string { return filepath.Join(b.opts.Dir, "topics") }

// PartitionProducers lists the idempotent producers a partition
// remembers (Kafka's DescribeProducers).
func (b *Broker) PartitionProducers(topic string, partition int32) ([]producer.Active, error) {
	_, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return nil, err
	}
	return p.prod.Producers(), nil
}
