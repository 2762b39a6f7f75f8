package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// job is one held message: its extender keeps the lease alive from receipt
// until settle, and cancels ctx if the lease is lost.
type job struct {
	m      *Message
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{} // closed to end the extender
	done   chan struct{} // closed when the extender has ended
}

// hold starts the extender for m. Its goroutine is owned by the job and
// ends when release closes stop.
func (w *Worker) hold(hctx context.Context, m *Message) *job {
	ctx, cancel := context.WithCancel(hctx)
	j := &job{m: m, ctx: ctx, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	lease := w.cfg.visibility
	if lease <= 0 {
		lease = time.Until(m.GetVisibilityDeadline().AsTime())
	}
	go func() {
		defer close(j.done)
		w.extendLoop(j, max(lease, 100*time.Millisecond))
	}()
	return j
}

// extendLoop renews the lease every half lease. A stale receipt or the
// extension limit means the message may go to someone else: the handler's
// context is cancelled so it can stop early.
func (w *Worker) extendLoop(j *job, lease time.Duration) {
	t := time.NewTimer(lease / 2)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), lease/2)
		_, err := w.c.Extend(ctx, w.queue, j.m.GetReceipt(), lease)
		cancel()
		switch {
		case errors.Is(err, ErrReceiptStale) || errors.Is(err, ErrExtensionLimit):
			w.cfg.onError(j.m, err)
			j.cancel()
			return
		case err != nil:
			w.cfg.onError(j.m, err) // transient; try again next tick
		case w.hooks.extended != nil:
			w.hooks.extended(j.m)
		}
		t.Reset(lease / 2)
	}
}

func (j *job) end() {
	close(j.stop)
	<-j.done
	j.cancel()
}

// handleLoop runs jobs until the channel closes. After Stop, jobs not yet
// started are released instead of run.
func (w *Worker) handleLoop(hctx, recvCtx context.Context, jobs <-chan *job, slots <-chan struct{}) {
	for j := range jobs {
		if recvCtx.Err() != nil {
			j.end()
			w.settle(j.m, nil, false)
		} else {
			err := w.runHandler(j)
			j.end()
			// A handler cut off by a hard stop did not fail: release its
			// message at once rather than after a failure's backoff.
			handled := !(hctx.Err() != nil && errors.Is(err, context.Canceled))
			w.settle(j.m, err, handled)
		}
		<-slots
	}
}

// runHandler calls the handler, turning a panic into an error.
func (w *Worker) runHandler(j *job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v}
		}
	}()
	return w.h(j.ctx, j.m)
}

// settle acks a handled message, or nacks it: with backoff after a failure,
// at once when it was never handled. It uses its own context: a stopping
// worker must still tell the broker.
func (w *Worker) settle(m *Message, err error, handled bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch {
	case handled && err == nil:
		if aerr := w.c.Ack(ctx, w.queue, m.GetReceipt()); aerr != nil {
			w.cfg.onError(m, aerr)
		}
		return
	case handled:
		w.cfg.onError(m, err)
	}
	var delay time.Duration
	reason := "released by a stopping worker"
	if handled {
		delay, reason = w.backoff(int(m.GetReceiveCount())), truncate(err.Error(), 256)
	}
	if nerr := w.c.Nack(ctx, w.queue, m.GetReceipt(), delay, reason); nerr != nil && !errors.Is(nerr, ErrReceiptStale) {
		w.cfg.onError(m, nerr)
	}
}

// backoff is the delay after the n-th failure: minBackoff·2^(n-1), capped
// at maxBackoff, then jittered so failed messages do not retry in step.
func (w *Worker) backoff(n int) time.Duration {
	if w.cfg.minBackoff <= 0 {
		return 0
	}
	d := w.cfg.minBackoff
	for i := 1; i < n && d < w.cfg.maxBackoff; i++ {
		d *= 2
	}
	return w.cfg.jitter(min(d, w.cfg.maxBackoff))
}

// equalJitter picks uniformly in [d/2, d]: never less than half the
// backoff, never more than it.
func equalJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
