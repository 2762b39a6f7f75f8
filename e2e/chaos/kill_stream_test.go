package chaos

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// streamProto drives a queue through StreamService.Consume with acks on
// the stream (client.AckedConsumer): the path whose acks free their lease
// slots before they are durable, so the stream's next receive shares their
// journal write. A kill then lands between an ack's submission and its
// fdatasync with a receive behind it. The stream is opened on first use
// and again after it broke (the server was killed).
func streamProto(addr, queue string) queueProto {
	c := client.New("http://" + addr)
	var mu sync.Mutex
	var s *client.AckedConsumer
	stream := func(ctx context.Context) (*client.AckedConsumer, error) {
		mu.Lock()
		defer mu.Unlock()
		if s == nil {
			var err error
			if s, err = c.ConsumeAcked(context.Background(), queue, client.MaxMessages(16), client.Visibility(2*time.Second)); err != nil {
				s = nil
				return nil, err
			}
		}
		return s, nil
	}
	broke := func(bad *client.AckedConsumer) {
		mu.Lock()
		defer mu.Unlock()
		if s == bad {
			s.Close()
			s = nil
		}
	}
	return queueProto{
		name: "stream",
		send: func(ctx context.Context, body string) error { _, err := c.Send(ctx, queue, []byte(body)); return err },
		receive: func(ctx context.Context) ([][2]string, error) {
			st, err := stream(ctx)
			if err != nil {
				return nil, err
			}
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			m, err := st.Receive(wctx)
			if err != nil {
				if wctx.Err() != nil && ctx.Err() == nil {
					return nil, nil // nothing within the wait
				}
				broke(st)
				return nil, err
			}
			return [][2]string{{string(m.GetBody()), m.GetReceipt()}}, nil
		},
		ack: func(ctx context.Context, receipt string) error {
			st, err := stream(ctx)
			if err != nil {
				return err
			}
			errs, err := st.Ack(ctx, receipt)
			if err != nil {
				broke(st)
				return err
			}
			return errors.Join(errs...)
		},
	}
}
