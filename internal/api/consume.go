package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	limit, vis, err := q.consumeParams(req.Msg)
	if err != nil {
		return err
	}
	return q.consumeLoop(ctx, name, limit, vis, req.Header(), func(ms []*sluicev1.Message) error {
		for _, m := range ms {
			if err := stream.Send(&sluicev1.ConsumeResponse{Message: m}); err != nil {
				return err
			}
		}
		return nil
	})
}

// consumeParams checks a ConsumeRequest and its queue: the stream's lease
// limit and visibility timeout.
func (a *API) consumeParams(m *sluicev1.ConsumeRequest) (int, time.Duration, error) {
	name := m.GetQueue()
	limit := int(m.GetMaxInFlight())
	if limit < 0 || limit > broker.MaxReceiveBatch {
		return 0, 0, invalidArg(ReasonInvalidArgument, "max_in_flight", fmt.Sprintf("max_in_flight %d: want 0 to %d", limit, broker.MaxReceiveBatch), qmeta(name))
	}
	if limit == 0 {
		limit = defaultConsumeFlight
	}
	vis, err := fromDur(m.GetVisibilityTimeout(), "visibility_timeout")
	if err != nil {
		return 0, 0, err
	}
	if _, err := a.describeQueue(name); err != nil {
		return 0, 0, err
	}
	return limit, vis, nil
}

// consumeLoop is a Consume stream's delivery side: it holds at most limit
// deliveries leased to the stream and sends each receive's deliveries, in
// order, with one call of send.
func (a *API) consumeLoop(ctx context.Context, name string, limit int, vis time.Duration, hdr http.Header, send func([]*sluicev1.Message) error) error {
	ctx, cancel := a.untilDrain(ctx)
	defer cancel()
	held := a.streams.open()
	defer a.streams.close(held)
	for ctx.Err() == nil {
		n, next := a.streams.outstanding(held, time.Now())
		if n >= limit {
			waitForSlot(ctx, held.changed, next)
			continue
		}
		start := a.traceNow()
		msgs, err := a.receive(ctx, name, broker.ReceiveOptions{Max: min(limit-n, maxReceiveBatch), Visibility: vis, Wait: consumeWait})
		a.traceConsumed(hdr, name, start, msgs)
		if ctx.Err() != nil {
			break // client gone or server draining; deliveries not sent stay leased until they expire
		}
		if err != nil {
			return a.toConnect(err, qmeta(name))
		}
		for _, m := range msgs {
			a.streams.add(held, name, m.GetReceipt(), m.GetVisibilityDeadline().AsTime())
		}
		if len(msgs) == 0 {
			continue
		}
		if err := send(msgs); err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return nil
			}
			return err
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
