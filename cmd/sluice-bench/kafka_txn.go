package main

import (
	"context"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnProducer is sender i's own transactional producer (--kafka-transactional): a
// transactional client runs one transaction at a time, so senders cannot share one.
// Each Send is begin, produce, commit: what an exactly-once pipeline pays per batch, the
// coordinator's steps (AddPartitionsToTxn, EndTxn and its markers) on top of the produce.
func (d *kafkaDriver) txnProducer(topic string, i int) (*kafkaTxnProducer, error) {
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(d.addr),
		kgo.TransactionalID(fmt.Sprintf("sluice-bench-%d-%d", os.Getpid(), i)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.DefaultProduceTopic(topic),
	}, d.sasl...)...)
	if err != nil {
		return nil, err
	}
	return &kafkaTxnProducer{c: c, topic: topic}, nil
}

type kafkaTxnProducer struct {
	c     *kgo.Client
	topic string
}

func (p *kafkaTxnProducer) Close() error {
	p.c.Close()
	return nil
}

func (p *kafkaTxnProducer) Send(ctx context.Context, bodies [][]byte) error {
	if err := p.c.BeginTransaction(); err != nil {
		return err
	}
	recs := make([]*kgo.Record, len(bodies))
	for i, b := range bodies {
		recs[i] = &kgo.Record{Topic: p.topic, Value: b}
	}
	if err := p.c.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = p.c.EndTransaction(ctx, kgo.TryAbort)
		return err
	}
	return p.c.EndTransaction(ctx, kgo.TryCommit)
}
