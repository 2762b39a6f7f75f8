package peers

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// redisDriver uses one stream: XADD to produce (a batch is one pipeline),
// XREADGROUP with one consumer group for the queue, and XACK of each
// delivered id; the log is read with XREAD. Redis replies to XADD after the
// AOF write, and with appendfsync always after its fsync too.
type redisDriver struct {
	c *redis.Client
}

func openRedis(ctx context.Context, o Options) (*redisDriver, error) {
	c := redis.NewClient(&redis.Options{Addr: o.Addr, PoolSize: o.InFlight + o.Consumers + 4,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return &redisDriver{c: c}, nil
}

func (d *redisDriver) Close() error { return d.c.Close() }

const redisGroup = "bench"

func (d *redisDriver) Prepare(ctx context.Context, name string, _ load.Kind) error {
	if err := d.c.Del(ctx, name).Err(); err != nil {
		return err
	}
	return d.c.XGroupCreateMkStream(ctx, name, redisGroup, "$").Err()
}

func (d *redisDriver) Producer(_ context.Context, name string, _ load.Kind, _ int) (load.Producer, error) {
	return &redisProducer{c: d.c, stream: name}, nil
}

type redisProducer struct {
	c      *redis.Client
	stream string
}

func (p *redisProducer) Close() error { return nil }

func (p *redisProducer) Send(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		return p.c.XAdd(ctx, &redis.XAddArgs{Stream: p.stream, Values: []any{"d", bodies[0]}}).Err()
	}
	_, err := p.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for _, b := range bodies {
			pl.XAdd(ctx, &redis.XAddArgs{Stream: p.stream, Values: []any{"d", b}})
		}
		return nil
	})
	return err
}

func (d *redisDriver) Consumer(_ context.Context, name string, kind load.Kind, i int) (load.Consumer, error) {
	if kind == load.Log && i > 0 { // one stream is one sequence
		return idleConsumer{}, nil
	}
	return &redisConsumer{c: d.c, stream: name, name: "c" + strconv.Itoa(i), log: kind == load.Log, last: "0"}, nil
}

type redisConsumer struct {
	c      *redis.Client
	stream string
	name   string
	log    bool
	last   string // XREAD position of the log reader
}

func (c *redisConsumer) Close() error { return nil }

func (c *redisConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	var res []redis.XStream
	var err error
	if c.log {
		res, err = c.c.XRead(ctx, &redis.XReadArgs{Streams: []string{c.stream, c.last}, Count: int64(limit), Block: wait}).Result()
	} else {
		res, err = c.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: redisGroup, Consumer: c.name,
			Streams: []string{c.stream, ">"}, Count: int64(limit), Block: wait}).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []load.Msg
	for _, s := range res {
		for _, m := range s.Messages {
			body, _ := m.Values["d"].(string)
			out = append(out, load.Msg{Body: []byte(body), Handle: m.ID})
			c.last = m.ID
		}
	}
	return out, nil
}

// Ack XACKs every delivered id, in one command.
func (c *redisConsumer) Ack(ctx context.Context, msgs []load.Msg) error {
	if c.log {
		return nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.Handle.(string)
	}
	return c.c.XAck(ctx, c.stream, redisGroup, ids...).Err()
}
