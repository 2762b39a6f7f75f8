package client

import (
	"context"
	"errors"
	"sync"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// AckedConsumer is a StreamService.Consume stream: deliveries come as with
// Consume, and Ack sends receipts on the same stream instead of a separate
// call. Receive and Ack may be called from different goroutines; Acks are
// answered in the order they were sent.
type AckedConsumer struct {
	stream interface {
		Send(*sluicev1.StreamServiceConsumeRequest) error
		Receive() (*sluicev1.StreamServiceConsumeResponse, error)
		CloseRequest() error
		CloseResponse() error
	}
	ctx    context.Context // the stream's; Close cancels it
	cancel context.CancelFunc
	msgs   chan *Message
	done   chan struct{} // the reader ended; err says why
	err    error

	mu      sync.Mutex // orders Sends with their waiters
	waiters []chan []*sluicev1.AckResult
}

// ConsumeAcked opens a Consume stream on queue whose acks ride on it (see
// AckedConsumer). MaxMessages bounds the unacked deliveries it holds
// (default 10), Visibility their lease. Close it when done.
func (c *Client) ConsumeAcked(ctx context.Context, queue string, opts ...ReceiveOption) (*AckedConsumer, error) {
	o := receiveOptions(opts)
	ctx, cancel := context.WithCancel(ctx)
	s := c.stream.Consume(ctx)
	start := &sluicev1.StreamServiceConsumeRequest{Start: &sluicev1.ConsumeRequest{
		Queue: queue, MaxInFlight: o.max, VisibilityTimeout: o.visibility}}
	if err := s.Send(start); err != nil {
		cancel()
		_, rerr := s.Receive() // the server's reason, if it gave one
		return nil, wrap(errors.Join(err, rerr))
	}
	a := &AckedConsumer{stream: s, ctx: ctx, cancel: cancel, msgs: make(chan *Message, max(int(o.max), 10)), done: make(chan struct{})}
	go a.read()
	return a, nil
}

func (a *AckedConsumer) read() {
	defer close(a.done)
	for {
		resp, err := a.stream.Receive()
		if err != nil {
			a.err = wrap(err)
			a.mu.Lock()
			for _, w := range a.waiters {
				close(w) // their acks are not known to be durable
			}
			a.waiters = nil
			a.mu.Unlock()
			return
		}
		if m := resp.GetMessage(); m != nil {
			select {
			case a.msgs <- m:
			case <-a.ctx.Done():
				return
			}
			continue
		}
		a.mu.Lock()
		if len(a.waiters) > 0 {
			w := a.waiters[0]
			a.waiters = a.waiters[1:]
			w <- resp.GetAcks()
		}
		a.mu.Unlock()
	}
}

// Receive returns the next delivery, waiting for it; the error is the
// stream's end (io.EOF-like: a nil message with ctx's or the stream's
// error).
func (a *AckedConsumer) Receive(ctx context.Context) (*Message, error) {
	select {
	case m := <-a.msgs:
		return m, nil
	case <-a.done:
		select {
		case m := <-a.msgs:
			return m, nil
		default:
		}
		if a.err == nil {
			return nil, errors.New("sluice: consume stream ended")
		}
		return nil, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Ack acks receipts (up to 100) with one durable write on the server and
// returns once they are: one error per receipt (nil: acked), or the
// stream's error for all of them.
func (a *AckedConsumer) Ack(ctx context.Context, receipts ...string) ([]error, error) {
	w := make(chan []*sluicev1.AckResult, 1)
	a.mu.Lock()
	select {
	case <-a.done:
		a.mu.Unlock()
		return nil, a.streamErr()
	default:
	}
	a.waiters = append(a.waiters, w)
	err := a.stream.Send(&sluicev1.StreamServiceConsumeRequest{Acks: receipts})
	a.mu.Unlock()
	if err != nil {
		<-a.done
		return nil, a.streamErr()
	}
	select {
	case res, ok := <-w:
		if !ok {
			return nil, a.streamErr()
		}
		errs := make([]error, len(receipts))
		for i := range errs {
			if i < len(res) {
				errs[i] = itemError(res[i].GetError())
			}
		}
		return errs, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *AckedConsumer) streamErr() error {
	<-a.done
	if a.err == nil {
		return errors.New("sluice: consume stream ended")
	}
	return a.err
}

// Close ends the stream; deliveries not acked return to the queue when
// their leases run out.
func (a *AckedConsumer) Close() error {
	// Half-close first: the server ends the stream when its side of the
	// requests ends, and the reader with it (a cancel alone may not reach
	// the server's handler until its long poll ends).
	a.mu.Lock()
	_ = a.stream.CloseRequest()
	a.mu.Unlock()
	a.cancel()
	<-a.done
	return a.stream.CloseResponse()
}
