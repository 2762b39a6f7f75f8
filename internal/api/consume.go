package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Consume streams deliveries: it long-polls the broker for as many messages
// as the stream has free lease slots, sends them, and when every slot is
// taken waits for an ack, a nack or the earliest lease to run out. It ends
// cleanly (no error) when the client goes away or the server drains.
func (q *queueService) Consume(ctx context.Context, req *connect.Request[sluicev1.ConsumeRequest], stream *connect.ServerStream[sluicev1.ConsumeResponse]) error {
	name := req.Msg.GetQueue()
	limit := int(req.Msg.GetMaxInFlight())
	if limit < 0 || limit > broker.MaxReceiveBatch {
		return invalidArg(ReasonInvalidArgument, "max_in_flight", fmt.Sprintf("max_in_flight %d: want 0 to %d", limit, broker.MaxReceiveBatch), qmeta(name))
	}
	if limit == 0 {
		limit = defaultConsumeFlight
	}
	vis, err := fromDur(req.Msg.GetVisibilityTimeout(), "visibility_timeout")
	if err != nil {
		return err
	}
	if _, err := q.describeQueue(name); err != nil {
		return err
	}
	ctx, cancel := q.untilDrain(ctx)
	defer cancel()
	held := q.streams.open()
	defer q.streams.close(held)
	for ctx.Err() == nil {
		n, next := q.streams.outstanding(held, time.Now())
		if n >= limit {
			waitForSlot(ctx, held.changed, next)
			continue
		}
		start := q.traceNow()
		msgs, err := q.receive(ctx, name, broker.ReceiveOptions{Max: min(limit-n, maxReceiveBatch), Visibility: vis, Wait: consumeWait})
		q.traceConsumed(req.Header(), name, start, msgs)
		if ctx.Err() != nil {
			break // client gone or server draining; deliveries not sent stay leased until they expire
		}
		if err != nil {
			return q.toConnect(err, qmeta(name))
		}
		for _, m := range msgs {
			q.streams.add(held, name, m.GetReceipt(), m.GetVisibilityDeadline().AsTime())
			if err := stream.Send(&sluicev1.ConsumeResponse{Message: m}); err != nil {
				if errors.Is(err, context.Canceled) || ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// waitForSlot blocks until a lease is released, the earliest lease's
// deadline passes, or ctx ends.
func waitForSlot(ctx context.Context, changed <-chan struct{}, next time.Time) {
	var expire <-chan time.Time
	if !next.IsZero() {
		t := time.NewTimer(max(time.Until(next), time.Millisecond))
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-changed:
	case <-expire:
	case <-ctx.Done():
	}
}
