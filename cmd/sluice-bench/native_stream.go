package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/bench/compare/load"
	"github.com/sluice-mq/sluice/client"
)

// ackedQueueConsumer reads a StreamService.Consume stream and acks on it:
// the acks of one Ack call go as one request, answered once durable. The
// goroutine that moves deliveries into msgs is owned by Close.
type ackedQueueConsumer struct {
	s      *client.AckedConsumer
	msgs   chan load.Msg
	errc   chan error
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newAckedQueueConsumer(ctx context.Context, c *client.Client, name string, prefetch int) (*ackedQueueConsumer, error) {
	ctx, cancel := context.WithCancel(ctx)
	s, err := c.ConsumeAcked(ctx, name, client.MaxMessages(prefetch), client.Visibility(time.Minute))
	if err != nil {
		cancel()
		return nil, err
	}
	q := &ackedQueueConsumer{s: s, msgs: make(chan load.Msg, 1024), errc: make(chan error, 1), cancel: cancel}
	q.wg.Go(func() {
		for {
			m, err := s.Receive(ctx)
			if err != nil {
				if ctx.Err() == nil {
					q.errc <- err
				}
				return
			}
			select {
			case q.msgs <- load.Msg{Body: m.GetBody(), Handle: m.GetReceipt()}:
			case <-ctx.Done():
				return
			}
		}
	})
	return q, nil
}

func (q *ackedQueueConsumer) Close() error {
	err := q.s.Close()
	q.cancel()
	q.wg.Wait()
	return err
}

func (q *ackedQueueConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	return takePushed(ctx, q.msgs, q.errc, limit, wait)
}

func (q *ackedQueueConsumer) Ack(ctx context.Context, msgs []load.Msg) error {
	for len(msgs) > 0 { // up to 100 receipts a request
		n := min(len(msgs), 100)
		receipts := make([]string, n)
		for i, m := range msgs[:n] {
			receipts[i] = m.Handle.(string)
		}
		errs, err := q.s.Ack(ctx, receipts...)
		if err != nil {
			return err
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}
