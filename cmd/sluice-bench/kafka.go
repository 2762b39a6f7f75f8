package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// kafkaDriver runs the bench over the Kafka protocol with franz-go. One
// producer client is shared by every sender, as an application would: the
// client batches what the senders have in flight into produce requests.
// With --kafka-producers N the senders share N clients instead (sender i
// uses client i mod N), each its own idempotent producer with its own
// connection: many application instances writing to the same partitions.
// Kafka has no per-message ack, so consumers read their partitions
// directly and Ack does nothing; every kind is a topic.
type kafkaDriver struct {
	addr string
	benchShape
	prod  *kgo.Client   // prods[0]: the admin calls go through it
	prods []*kgo.Client // one per --kafka-producers
	sasl  []kgo.Opt     // authentication and TLS (--tls-ca), for every client
	// transactional (--kafka-transactional): every sender has its own transactional
	// producer and each send is a transaction (kafka_txn.go).
	transactional bool
}

// kafkaSASL is --kafka-sasl-*: how the clients authenticate, if at all
// (to measure a broker with --auth-file).
type kafkaSASL struct{ mechanism, user, password string }

func (k kafkaSASL) opts() ([]kgo.Opt, error) {
	pass := k.password
	if pass == "" {
		pass = os.Getenv("SLUICE_BENCH_KAFKA_PASSWORD")
	}
	var m sasl.Mechanism
	switch k.mechanism {
	case "":
		return nil, nil
	case "PLAIN":
		m = plain.Auth{User: k.user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: k.user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: k.user, Pass: pass}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("--kafka-sasl-mechanism: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got %q", k.mechanism)
	}
	return []kgo.Opt{kgo.SASL(m)}, nil
}

func newKafkaDriver(_ context.Context, addr string, shape benchShape, auth kafkaSASL, producers int) (*kafkaDriver, error) {
	sasl, err := auth.opts()
	if err != nil {
		return nil, err
	}
	if shape.tls != nil {
		sasl = append(sasl, kgo.DialTLSConfig(shape.tls.Clone()))
	}
	d := &kafkaDriver{addr: addr, benchShape: shape, sasl: sasl}
	for range max(producers, 1) {
		prod, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr),
			kgo.RequiredAcks(kgo.AllISRAcks()),                // acked means stored (and synced per --fsync)
			kgo.ProducerBatchCompression(kgo.NoCompression()), // every peer sends bytes as they are
			kgo.ProducerLinger(0),                             // no added wait: in-flight sends batch themselves
		}, sasl...)...)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.prods = append(d.prods, prod)
	}
	d.prod = d.prods[0]
	return d, nil
}

func (d *kafkaDriver) Close() error {
	for _, p := range d.prods {
		p.Close()
	}
	return nil
}

func (d *kafkaDriver) Prepare(ctx context.Context, name string, _ load.Kind) error {
	adm := kadm.NewClient(d.prod)
	dres, err := adm.DeleteTopics(ctx, name)
	if err != nil {
		return err
	}
	for _, r := range dres {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("delete topic %s: %w", name, r.Err)
		}
	}
	cres, err := adm.CreateTopics(ctx, d.partitions, max(d.replication, 1), nil, name)
	if err != nil {
		return err
	}
	for _, r := range cres {
		// TOPIC_ALREADY_EXISTS right after the delete is this create's own retry: a
		// large topic on a cluster can take longer than the request's timeout.
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, r.Err)
		}
	}
	return waitLeaders(ctx, adm, name, d.partitions)
}

// waitLeaders waits until Metadata names a leader for every partition of topic: in a
// cluster each partition's Raft group elects one after the topic is created, and a timed
// run must not start with that election. On a single node it returns at once. A node
// creates its groups one sync after another, so the wait allowed grows with partitions.
func waitLeaders(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	limit := 30*time.Second + time.Duration(partitions)*100*time.Millisecond
	deadline := time.Now().Add(limit)
	for {
		md, err := adm.Metadata(ctx, topic)
		led := int32(0)
		if err == nil {
			for _, p := range md.Topics[topic].Partitions {
				if p.Err == nil && p.Leader >= 0 {
					led++
				}
			}
		}
		if led == partitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s: %d of %d partitions have a leader after %v (last error: %v)", topic, led, partitions, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *kafkaDriver) Producer(_ context.Context, name string, _ load.Kind, i int) (load.Producer, error) {
	if d.transactional {
		return d.txnProducer(name, i)
	}
	return &kafkaProducer{c: d.prods[i%len(d.prods)], topic: name}, nil
}

type kafkaProducer struct {
	c     *kgo.Client
	topic string
}

func (p *kafkaProducer) Close() error { return nil }

func (p *kafkaProducer) Send(ctx context.Context, bodies [][]byte) error {
	recs := make([]*kgo.Record, len(bodies))
	for i, b := range bodies {
		recs[i] = &kgo.Record{Topic: p.topic, Value: b}
	}
	return p.c.ProduceSync(ctx, recs...).FirstErr()
}

func (d *kafkaDriver) Consumer(_ context.Context, name string, _ load.Kind, i int) (load.Consumer, error) {
	parts := map[int32]kgo.Offset{}
	for p := int32(i); p < d.partitions; p += int32(d.consumers) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	if len(parts) == 0 {
		return &kafkaConsumer{}, nil
	}
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(d.addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{name: parts}),
		kgo.FetchMaxWait(100 * time.Millisecond)}, d.sasl...)...)
	if err != nil {
		return nil, err
	}
	return &kafkaConsumer{c: c}, nil
}

// kafkaConsumer polls the partitions assigned to it; c is nil when there
// were none for it.
type kafkaConsumer struct{ c *kgo.Client }

func (c *kafkaConsumer) Ack(context.Context, []load.Msg) error { return nil }

func (c *kafkaConsumer) Close() error {
	if c.c != nil {
		c.c.Close()
	}
	return nil
}

func (c *kafkaConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	if c.c == nil {
		time.Sleep(wait)
		return nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	fs := c.c.PollRecords(wctx, limit)
	for _, e := range fs.Errors() {
		if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
			return nil, fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
		}
	}
	var out []load.Msg
	fs.EachRecord(func(r *kgo.Record) { out = append(out, load.Msg{Body: r.Value}) })
	return out, nil
}
