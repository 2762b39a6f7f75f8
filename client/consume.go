package client

import (
	"context"
	"iter"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Consume streams deliveries from a queue as they become visible, holding at
// most MaxMessages (default 10) unacked at once: ack, extend or nack each
// with the usual calls. The sequence ends when ctx ends, the caller stops
// ranging, or the server closes the stream (it drains at shutdown: that end
// yields no error). A failure is yielded once, as the last pair.
func (c *Client) Consume(ctx context.Context, queue string, opts ...ReceiveOption) iter.Seq2[*Message, error] {
	o := receiveOptions(opts)
	return func(yield func(*Message, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the stream when the caller breaks out
		stream, err := c.queue.Consume(ctx, connect.NewRequest(&sluicev1.ConsumeRequest{
			Queue: queue, MaxInFlight: o.max, VisibilityTimeout: o.visibility,
		}))
		if err != nil {
			yield(nil, wrap(err))
			return
		}
		defer stream.Close()
		for stream.Receive() {
			if !yield(stream.Msg().GetMessage(), nil) {
				return
			}
		}
		if err := stream.Err(); err != nil && ctx.Err() == nil {
			yield(nil, wrap(err))
		}
	}
}
