package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// rabbitConns is how many AMQP connections the producers' channels are
// spread over: one connection is one socket and one Erlang process chain on
// the server, and an application with hundreds of publishers would not
// push them all through one.
const rabbitConns = 4

// rabbitDriver uses one durable queue (quorum or classic, per
// Options.RabbitQueueType) on the default exchange. Every producer has its
// own channel in confirm mode and waits for the broker's confirm of each
// persistent message; consumers use manual acks with a prefetch (basic.qos)
// and ack each delivery by itself (multiple=false).
type rabbitDriver struct {
	o     Options
	mu    sync.Mutex
	conns []*amqp.Connection
}

func openRabbit(o Options) (*rabbitDriver, error) {
	if o.RabbitQueueType != "quorum" && o.RabbitQueueType != "classic" {
		return nil, fmt.Errorf("rabbitmq queue type %q: want quorum or classic", o.RabbitQueueType)
	}
	d := &rabbitDriver{o: o}
	for range rabbitConns {
		c, err := amqp.Dial("amqp://guest:guest@" + o.Addr + "/")
		if err != nil {
			d.Close()
			return nil, err
		}
		d.conns = append(d.conns, c)
	}
	return d, nil
}

func (d *rabbitDriver) Close() error {
	var errs []error
	for _, c := range d.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

func (d *rabbitDriver) Prepare(_ context.Context, name string, _ load.Kind) error {
	ch, err := d.conns[0].Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if _, err := ch.QueueDelete(name, false, false, false); err != nil {
		return err
	}
	_, err = ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": d.o.RabbitQueueType})
	return err
}

func (d *rabbitDriver) channel(i int) (*amqp.Channel, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[i%len(d.conns)].Channel()
}

func (d *rabbitDriver) Producer(_ context.Context, name string, _ load.Kind, i int) (load.Producer, error) {
	ch, err := d.channel(i)
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, err
	}
	return &rabbitProducer{ch: ch, queue: name}, nil
}

type rabbitProducer struct {
	ch    *amqp.Channel
	queue string
	dcs   []*amqp.DeferredConfirmation
}

func (p *rabbitProducer) Close() error { return p.ch.Close() }

func (p *rabbitProducer) Send(ctx context.Context, bodies [][]byte) error {
	p.dcs = p.dcs[:0]
	for _, b := range bodies {
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, "", p.queue, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: b})
		if err != nil {
			return err
		}
		p.dcs = append(p.dcs, dc)
	}
	for _, dc := range p.dcs {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("publish nacked by the broker")
		}
	}
	return nil
}

func (d *rabbitDriver) Consumer(_ context.Context, name string, _ load.Kind, i int) (load.Consumer, error) {
	ch, err := d.channel(i)
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(d.o.Prefetch, 0, false); err != nil {
		ch.Close()
		return nil, err
	}
	dels, err := ch.Consume(name, "", false, false, false, false, nil)
	if err != nil {
		ch.Close()
		return nil, err
	}
	return &rabbitConsumer{ch: ch, dels: dels}, nil
}

// rabbitConsumer reads the channel's delivery stream; closing the channel
// ends it (the client library owns that goroutine).
type rabbitConsumer struct {
	ch   *amqp.Channel
	dels <-chan amqp.Delivery
}

func (c *rabbitConsumer) Close() error { return c.ch.Close() }

func (c *rabbitConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	return chanReceive(ctx, c.dels, nil, limit, wait, func(d amqp.Delivery) load.Msg {
		return load.Msg{Body: d.Body, Handle: d.DeliveryTag}
	})
}

func (c *rabbitConsumer) Ack(_ context.Context, msgs []load.Msg) error {
	for _, m := range msgs {
		if err := c.ch.Ack(m.Handle.(uint64), false); err != nil {
			return err
		}
	}
	return nil
}
