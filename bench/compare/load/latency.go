package load

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// warmUp is the due time stamped on warm-up messages, which receivers
// neither time nor count.
var warmUp = time.Unix(0, 0)

// latency sends at a fixed rate and measures each message from when its
// send was due — not when it went out — to its receipt, so a broker that
// stalls the sender is charged for every message the stall delayed (no
// coordinated omission).
func (r *run) latency(ctx context.Context) error {
	ctx, cancel := r.hardStop(ctx)
	defer cancel()
	if err := r.d.Prepare(ctx, r.cfg.Name, Queue); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	period := time.Second / time.Duration(r.cfg.Rate)
	r.limit = min(r.cfg.Count, int64(r.cfg.Duration/period))
	r.what, r.counted, r.atReceipt = "due to receipt (fixed rate)", &r.recv, true

	g, gctx := newGroup(ctx)
	defer r.progress(&r.sent, &r.recv)()
	quit := make(chan struct{})
	sendersDone := make(chan struct{})
	done := func() bool {
		select {
		case <-sendersDone:
			return r.recv.Load() >= r.sent.Load()
		default:
			return false
		}
	}
	if err := r.receivers(gctx, g, Queue, quit, done, r.sinceDue); err != nil {
		g.cancel()
		return firstErr(g.Wait(), err)
	}
	err := r.schedule(gctx, period)
	close(sendersDone)
	// Wait for the last messages, at most grace; what has not arrived by
	// then is reported as missing.
	t := time.AfterFunc(grace, func() { close(quit) })
	err = firstErr(err, g.Wait())
	t.Stop()
	r.end = r.start.Add(time.Duration(r.limit) * period)
	return err
}

// schedule hands sequence numbers to InFlight senders at their due times
// and returns when all were sent. A sender stamps a message with its due
// time, so a backlog of due sends is measured from the schedule.
//
// Each sender first sends one warm-up message, untimed and not counted, so
// that connections are open before the schedule starts (a client that
// connects lazily would otherwise charge its handshakes to the first
// messages, and to p99). The schedule starts, and r.start is set, once
// every warm-up send returned.
func (r *run) schedule(ctx context.Context, period time.Duration) error {
	due := make(chan int64, r.cfg.InFlight)
	begin := make(chan struct{})
	var warm sync.WaitGroup
	sg, sctx := newGroup(ctx)
	for i := range r.cfg.InFlight {
		p, err := r.d.Producer(ctx, r.cfg.Name, Queue, i)
		if err != nil {
			close(due)
			sg.cancel()
			return firstErr(sg.Wait(), fmt.Errorf("producer %d: %w", i, err))
		}
		warm.Add(1)
		sg.Go(func() error {
			defer p.Close()
			pl := newPayload(r.cfg.Size)
			body := [][]byte{pl}
			pl.stamp(warmUp, 0)
			err := p.Send(sctx, body)
			warm.Done()
			if err != nil {
				return fmt.Errorf("warm-up send: %w", err)
			}
			select {
			case <-begin:
			case <-sctx.Done():
				return nil
			}
			for seq := range due {
				due := r.start.Add(time.Duration(seq) * period)
				pl.stamp(due, seq)
				if err := p.Send(sctx, body); err != nil {
					return fmt.Errorf("send: %w", err)
				}
				r.ackHist.Record(time.Since(due))
				r.sent.Add(1)
			}
			return nil
		})
	}
	warm.Wait()
	r.start = time.Now()
	close(begin)
	for seq := int64(0); seq < r.limit && sctx.Err() == nil; seq++ {
		if wait := time.Until(r.start.Add(time.Duration(seq) * period)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case due <- seq:
		case <-sctx.Done():
		}
	}
	close(due)
	return sg.Wait()
}
