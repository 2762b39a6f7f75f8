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
	return b.streams.pids.Init(name)
}
