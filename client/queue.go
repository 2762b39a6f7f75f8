package client

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// call runs one unary RPC and unwraps its answer, translating the error.
func call[Req, Res any](ctx context.Context, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) (*Res, error) {
	res, err := fn(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, wrap(err)
	}
	return res.Msg, nil
}

// CreateQueue creates a queue; cfg may be nil for the defaults. Creating an
// existing queue with the same config returns it.
func (c *Client) CreateQueue(ctx context.Context, name string, cfg *QueueConfig) (*Queue, error) {
	res, err := call(ctx, c.queue.CreateQueue, &sluicev1.CreateQueueRequest{Name: name, Config: cfg})
	return res.GetQueue(), err
}

// GetQueue returns a queue's config and current stats. A subscription is
// named "<topic>/<subscription>".
func (c *Client) GetQueue(ctx context.Context, name string) (*Queue, error) {
	res, err := call(ctx, c.queue.GetQueue, &sluicev1.GetQueueRequest{Name: name})
	return res.GetQueue(), err
}

// ListQueues returns every queue whose name starts with prefix, reading all
// pages.
func (c *Client) ListQueues(ctx context.Context, prefix string) ([]*Queue, error) {
	var out []*Queue
	token := ""
	for {
		res, err := call(ctx, c.queue.ListQueues, &sluicev1.ListQueuesRequest{Prefix: prefix, PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, res.GetQueues()...)
		if token = res.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// UpdateQueue sets the named fields of cfg (proto names such as
// "visibility_timeout" or "dead_letter") and leaves the others.
func (c *Client) UpdateQueue(ctx context.Context, name string, cfg *QueueConfig, fields ...string) (*Queue, error) {
	res, err := call(ctx, c.queue.UpdateQueue, &sluicev1.UpdateQueueRequest{Name: name, Config: cfg, UpdateMask: &fieldmaskpb.FieldMask{Paths: fields}})
	return res.GetQueue(), err
}

// DeleteQueue deletes a queue and its messages.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	_, err := call(ctx, c.queue.DeleteQueue, &sluicev1.DeleteQueueRequest{Name: name})
	return err
}

// PurgeQueue deletes every message of a queue and says how many.
func (c *Client) PurgeQueue(ctx context.Context, name string) (int64, error) {
	res, err := call(ctx, c.queue.PurgeQueue, &sluicev1.PurgeQueueRequest{Queue: name})
	return res.GetPurged(), err
}

// SendOption shapes one sent message.
type SendOption func(*SendEntry)

// WithAttribute adds a typed attribute ("String", "Number", "Binary", …).
func WithAttribute(name, typ string, value []byte) SendOption {
	return func(e *SendEntry) {
		if e.Attributes == nil {
			e.Attributes = map[string]*AttributeValue{}
		}
		e.Attributes[name] = &AttributeValue{Type: typ, Value: value}
	}
}

// WithGroupID sets the FIFO message group (required on FIFO queues).
func WithGroupID(id string) SendOption { return func(e *SendEntry) { e.GroupId = id } }

// WithDeduplicationID sets the deduplication id (FIFO queues).
func WithDeduplicationID(id string) SendOption { return func(e *SendEntry) { e.DeduplicationId = id } }

// WithDelay keeps the message invisible for d after the send (0 overrides
// the queue's default delay).
func WithDelay(d time.Duration) SendOption { return func(e *SendEntry) { e.Delay = durationpb.New(d) } }

// Entry builds a SendEntry for SendBatch.
func Entry(body []byte, opts ...SendOption) *SendEntry {
	e := &SendEntry{Body: body}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Send stores one message and returns once it is durable.
func (c *Client) Send(ctx context.Context, queue string, body []byte, opts ...SendOption) (*SendResult, error) {
	res, err := call(ctx, c.queue.Send, &sluicev1.SendRequest{Queue: queue, Message: Entry(body, opts...)})
	return res.GetResult(), err
}

// SendBatch stores up to 100 messages together: all or none.
func (c *Client) SendBatch(ctx context.Context, queue string, entries []*SendEntry) ([]*SendResult, error) {
	res, err := call(ctx, c.queue.SendBatch, &sluicev1.SendBatchRequest{Queue: queue, Messages: entries})
	return res.GetResults(), err
}

// ReceiveOption shapes a Receive or Consume.
type ReceiveOption func(*receiveOpts)

type receiveOpts struct {
	max        int32
	wait       *durationpb.Duration
	visibility *durationpb.Duration
}

// MaxMessages receives up to n messages (1 to 100; default 1). For Consume
// it is the number of unacked deliveries the stream may hold.
func MaxMessages(n int) ReceiveOption { return func(o *receiveOpts) { o.max = int32(n) } }

// Wait long-polls up to d for a first message (at most 20s).
func Wait(d time.Duration) ReceiveOption { return func(o *receiveOpts) { o.wait = durationpb.New(d) } }

// Visibility overrides the queue's visibility timeout for these deliveries.
func Visibility(d time.Duration) ReceiveOption {
	return func(o *receiveOpts) { o.visibility = durationpb.New(d) }
}

func receiveOptions(opts []ReceiveOption) receiveOpts {
	var o receiveOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Receive returns up to MaxMessages visible messages, waiting up to Wait
// for the first. No message after the wait is an empty slice, not an error.
func (c *Client) Receive(ctx context.Context, queue string, opts ...ReceiveOption) ([]*Message, error) {
	o := receiveOptions(opts)
	res, err := call(ctx, c.queue.Receive, &sluicev1.ReceiveRequest{Queue: queue, MaxMessages: o.max, Wait: o.wait, VisibilityTimeout: o.visibility})
	return res.GetMessages(), err
}

// Peek returns up to max (1 to 100; 0 is 10) of a queue's unfinished
// messages from sequence from on (0: from the first), without receiving
// them: nothing is hidden, counted or made a receipt. The response's
// next_sequence continues a page.
func (c *Client) Peek(ctx context.Context, queue string, from uint64, max int32) (*PeekResponse, error) {
	return call(ctx, c.queue.Peek, &sluicev1.PeekRequest{Queue: queue, FromSequence: from, MaxMessages: max})
}

// Ack deletes a delivered message. A stale receipt fails with ErrReceiptStale.
func (c *Client) Ack(ctx context.Context, queue, receipt string) error {
	_, err := call(ctx, c.queue.Ack, &sluicev1.AckRequest{Queue: queue, Receipt: receipt})
	return err
}

// AckBatch acks up to 100 receipts. The slice has one error per receipt
// (nil where the ack succeeded); the error is for the call as a whole.
func (c *Client) AckBatch(ctx context.Context, queue string, receipts []string) ([]error, error) {
	res, err := call(ctx, c.queue.AckBatch, &sluicev1.AckBatchRequest{Queue: queue, Receipts: receipts})
	if err != nil {
		return nil, err
	}
	out := make([]error, len(res.GetResults()))
	for i, r := range res.GetResults() {
		out[i] = itemError(r.GetError())
	}
	return out, nil
}

// Extend keeps a delivery invisible for d from now (a heartbeat) and
// returns the new deadline.
func (c *Client) Extend(ctx context.Context, queue, receipt string, d time.Duration) (time.Time, error) {
	res, err := call(ctx, c.queue.Extend, &sluicev1.ExtendRequest{Queue: queue, Receipt: receipt, VisibilityTimeout: durationpb.New(d)})
	if err != nil {
		return time.Time{}, err
	}
	return res.GetVisibilityDeadline().AsTime(), nil
}

// Nack releases a delivery: visible again after delay (0: at once). reason
// travels to the dead-letter queue if the message ends there.
func (c *Client) Nack(ctx context.Context, queue, receipt string, delay time.Duration, reason string) error {
	req := &sluicev1.NackRequest{Queue: queue, Receipt: receipt, Reason: reason}
	if delay > 0 {
		req.Delay = durationpb.New(delay)
	}
	_, err := call(ctx, c.queue.Nack, req)
	return err
}
