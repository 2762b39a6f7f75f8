// Package peers adapts the brokers sluice is compared with — NATS
// JetStream, RabbitMQ, Redis Streams and PostgreSQL — to load.Driver,
// each through its own Go client, so bench/compare runs the same
// workloads through every one of them.
package peers

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// Options say where a peer listens and how to use it.
type Options struct {
	Addr      string // host:port
	Consumers int    // consumer clients a run opens
	Prefetch  int    // unacked deliveries a consumer holds
	InFlight  int    // sizes connection pools
	// RabbitQueueType is "quorum" or "classic" (durable, persistent messages).
	RabbitQueueType string
}

// Open returns the driver of the named peer: nats, rabbitmq, redis or
// postgres.
func Open(ctx context.Context, peer string, o Options) (load.Driver, error) {
	switch peer {
	case "nats":
		return openNATS(o)
	case "rabbitmq":
		return openRabbit(o)
	case "redis":
		return openRedis(ctx, o)
	case "postgres":
		return openPostgres(ctx, o)
	}
	return nil, fmt.Errorf("unknown peer %q (nats, rabbitmq, redis, postgres)", peer)
}

// chanConsumer turns a client that pushes deliveries into a channel into
// Receive calls: wait up to wait for the first, then take what is there.
func chanReceive[T any](ctx context.Context, ch <-chan T, errc <-chan error, limit int, wait time.Duration, conv func(T) load.Msg) ([]load.Msg, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	var out []load.Msg
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("delivery channel closed")
		}
		out = append(out, conv(m))
	case err := <-errc:
		return nil, err
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(out) < limit {
		select {
		case m, ok := <-ch:
			if !ok {
				return out, nil
			}
			out = append(out, conv(m))
		default:
			return out, nil
		}
	}
	return out, nil
}
