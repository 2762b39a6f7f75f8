package peers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// natsDriver uses a JetStream stream with file storage: limits retention
// for the log, work-queue retention for the queue, with one durable pull
// consumer shared by the consumer clients (explicit acks). Producers share
// one connection and wait for each publish's PubAck (stored, and synced
// per the server's sync_interval).
type natsDriver struct {
	o  Options
	nc *nats.Conn
	js jetstream.JetStream
}

func openNATS(o Options) (*natsDriver, error) {
	nc, err := nats.Connect("nats://"+o.Addr, nats.MaxReconnects(0))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsDriver{o: o, nc: nc, js: js}, nil
}

func (d *natsDriver) Close() error { d.nc.Close(); return nil }

func (d *natsDriver) Prepare(ctx context.Context, name string, kind load.Kind) error {
	if err := d.js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	ret := jetstream.LimitsPolicy
	if kind == load.Queue {
		ret = jetstream.WorkQueuePolicy
	}
	s, err := d.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name},
		Storage: jetstream.FileStorage, Retention: ret, Replicas: 1})
	if err != nil || kind != load.Queue {
		return err
	}
	_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: d.o.Prefetch * max(d.o.Consumers, 1), AckWait: time.Minute})
	return err
}

func (d *natsDriver) Producer(_ context.Context, name string, _ load.Kind, _ int) (load.Producer, error) {
	return &natsProducer{js: d.js, subj: name}, nil
}

type natsProducer struct {
	js   jetstream.JetStream
	subj string
}

func (p *natsProducer) Close() error { return nil }

func (p *natsProducer) Send(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := p.js.Publish(ctx, p.subj, bodies[0])
		return err
	}
	futs := make([]jetstream.PubAckFuture, 0, len(bodies))
	for _, b := range bodies {
		// PublishAsync copies the data into the outgoing buffer.
		f, err := p.js.PublishAsync(p.subj, b)
		if err != nil {
			return err
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (d *natsDriver) Consumer(ctx context.Context, name string, kind load.Kind, i int) (load.Consumer, error) {
	var cons jetstream.Consumer
	var err error
	if kind == load.Log {
		if i > 0 { // a stream is one sequence: one reader, like one partition
			return &idleConsumer{}, nil
		}
		cons, err = d.js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{})
	} else {
		cons, err = d.js.Consumer(ctx, name, "bench")
	}
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(d.o.Prefetch))
	if err != nil {
		return nil, err
	}
	c := &natsConsumer{it: it, msgs: make(chan jetstream.Msg, d.o.Prefetch), errc: make(chan error, 1), ack: kind == load.Queue}
	c.wg.Add(1)
	go c.pump()
	return c, nil
}

// natsConsumer's pump goroutine moves deliveries from the iterator to a
// channel; Close stops the iterator, which ends the pump, and joins it.
type natsConsumer struct {
	it   jetstream.MessagesContext
	msgs chan jetstream.Msg
	errc chan error
	ack  bool
	wg   sync.WaitGroup
}

func (c *natsConsumer) pump() {
	defer c.wg.Done()
	defer close(c.msgs)
	for {
		m, err := c.it.Next()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				c.errc <- err
			}
			return
		}
		c.msgs <- m
	}
}

func (c *natsConsumer) Close() error {
	c.it.Stop()
	go func() { // unblock a pump waiting to hand over a message
		for range c.msgs {
		}
	}()
	c.wg.Wait()
	return nil
}

func (c *natsConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	return chanReceive(ctx, c.msgs, c.errc, limit, wait, func(m jetstream.Msg) load.Msg {
		return load.Msg{Body: m.Data(), Handle: m}
	})
}

// Ack acks each message by itself. JetStream's Ack is sent without
// waiting for the server, as applications normally do.
func (c *natsConsumer) Ack(_ context.Context, msgs []load.Msg) error {
	if !c.ack {
		return nil
	}
	for _, m := range msgs {
		if err := m.Handle.(jetstream.Msg).Ack(); err != nil {
			return err
		}
	}
	return nil
}

// idleConsumer is a consumer client with nothing to read.
type idleConsumer struct{}

func (idleConsumer) Close() error                          { return nil }
func (idleConsumer) Ack(context.Context, []load.Msg) error { return nil }
func (idleConsumer) Receive(ctx context.Context, _ int, wait time.Duration) ([]load.Msg, error) {
	select {
	case <-time.After(wait):
	case <-ctx.Done():
	}
	return nil, nil
}
