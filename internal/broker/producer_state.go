package broker

import "github.com/sluice-mq/sluice/internal/producer"

// ProducerID is an idempotent producer's identity (package producer).
type ProducerID = producer.ID

// InitProducerID returns an id for an idempotent producer. name "" gets a
// fresh id with epoch 0. A name (Kafka's transactional id) keeps its id
// across calls and bumps its epoch, so batches of the previous instance are
// refused with ErrProducerFenced. Durable before it returns.
func (b *Broker) InitProducerID(name string) (ProducerID, error) {
	if b.streams == nil {
		return ProducerID{}, ErrClosed
	}
	id, err := b.streams.pids.Init(name)
	if err == nil && b.cluster != nil {
		// Ids are allocated by each node alone: the node id in the high bits keeps
		// them apart across the cluster (2^40 ids per node). Partitions check a
		// producer's sequence and epoch in their own replicated state, not here.
		id.ID += int64(b.cluster.node) << clusterPIDShift
	}
	return id, err
}

// clusterPIDShift places a node's id above its own producer ids.
const clusterPIDShift = 40
