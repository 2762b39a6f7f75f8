package client

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// A call answered NOT_LEADER was not carried out (the node refused it before doing
// anything): in a cluster it means no leader is known for what the call names — an
// election is under way, or a queue or topic was created a moment ago — since a node that
// knows the leader forwards the call itself. The client retries such unary calls with
// backoff for a few seconds, which is what an election takes, so its caller never sees
// leadership unless it stays unknown. REPLICATION_UNKNOWN (maybe applied) is never
// retried, nor is Produce: a Produce over several partitions may have written those the
// node leads before it found one led elsewhere, and then answers NOT_LEADER naming no
// leader (the caller decides; with idempotence a retry is deduplicated).
const (
	notLeaderFirstWait = 50 * time.Millisecond
	notLeaderMaxWait   = time.Second
	// DefaultNotLeaderRetry is how long a unary call answered NOT_LEADER is retried.
	DefaultNotLeaderRetry = 10 * time.Second
)

// WithNotLeaderRetry sets how long a unary call answered NOT_LEADER is retried (default
// DefaultNotLeaderRetry); 0 returns the error at once.
func WithNotLeaderRetry(d time.Duration) Option { return func(c *config) { c.notLeaderRetry = &d } }

type notLeaderRetry time.Duration

func (r notLeaderRetry) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if r <= 0 || req.Spec().Procedure == sluicev1connect.TopicServiceProduceProcedure || ctx.Value(noNotLeaderRetry{}) != nil {
			return next(ctx, req)
		}
		wait, deadline := notLeaderFirstWait, time.Now().Add(time.Duration(r))
		for {
			res, err := next(ctx, req)
			if err == nil || !isNotLeader(err) || time.Now().Add(wait).After(deadline) {
				return res, err
			}
			select {
			case <-ctx.Done():
				return res, err
			case <-time.After(wait):
			}
			wait = min(2*wait, notLeaderMaxWait)
		}
	}
}

func (notLeaderRetry) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (notLeaderRetry) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func isNotLeader(err error) bool {
	var e *Error
	return errors.As(wrap(err), &e) && e.Code == connect.CodeUnavailable && e.Reason == "NOT_LEADER"
}
