package load

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// hardStop bounds a whole run: its duration, a prefill of the same length,
// and grace for what is in flight at the end.
func (r *run) hardStop(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 2*r.cfg.Duration+3*grace)
}

// logKind is the kind produce and consume use.
func (r *run) logKind() Kind {
	if r.cfg.Queue {
		return Queue
	}
	return Log
}

func (r *run) produce(ctx context.Context) error {
	ctx, cancel := r.hardStop(ctx)
	defer cancel()
	if err := r.d.Prepare(ctx, r.cfg.Name, r.logKind()); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	r.what, r.limit, r.counted = "send to ack", r.cfg.Count, &r.sent
	g, gctx := newGroup(ctx)
	defer r.progress(&r.sent, nil)()
	r.start = time.Now()
	if err := r.senders(gctx, g, r.logKind(), r.cfg.InFlight, r.cfg.Batch, r.start.Add(r.cfg.Duration), true); err != nil {
		g.cancel()
		return firstErr(g.Wait(), err)
	}
	err := g.Wait()
	r.end = time.Now()
	return err
}

// consume writes a backlog first (untimed, bounded by the count and the
// duration), then times reading it all back.
func (r *run) consume(ctx context.Context) error {
	ctx, cancel := r.hardStop(ctx)
	defer cancel()
	if err := r.d.Prepare(ctx, r.cfg.Name, r.logKind()); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	r.limit = r.cfg.Count
	fill, fctx := newGroup(ctx)
	if err := r.senders(fctx, fill, r.logKind(), max(r.cfg.InFlight, 64), 64, time.Now().Add(r.cfg.Duration), false); err != nil {
		fill.cancel()
		return firstErr(fill.Wait(), err)
	}
	if err := fill.Wait(); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	backlog := r.sent.Load()
	r.what, r.counted = "none (throughput only)", &r.recv
	g, gctx := newGroup(ctx)
	defer r.progress(nil, &r.recv)()
	quit := make(chan struct{})
	defer time.AfterFunc(r.cfg.Duration, func() { close(quit) }).Stop() // the timer is owned by this run
	r.start = time.Now()
	err := r.receivers(gctx, g, r.logKind(), quit, func() bool { return r.recv.Load() >= backlog }, func(Msg, time.Time) bool { return true })
	err = firstErr(g.Wait(), err)
	r.end = time.Now()
	return err
}

// roundTrip sends and receives at once; each message's latency is from
// its send to the return of its own ack.
func (r *run) roundTrip(ctx context.Context) error {
	ctx, cancel := r.hardStop(ctx)
	defer cancel()
	if err := r.d.Prepare(ctx, r.cfg.Name, Queue); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	r.what, r.limit, r.counted = "send to ack of receipt", r.cfg.Count, &r.recv
	g, gctx := newGroup(ctx)
	defer r.progress(&r.sent, &r.recv)()
	stop := time.Now().Add(r.cfg.Duration)
	quit := make(chan struct{})
	defer time.AfterFunc(r.cfg.Duration, func() { close(quit) }).Stop() // the timer is owned by this run
	done := func() bool { return r.recv.Load() >= r.limit }
	r.start = time.Now()
	err := r.receivers(gctx, g, Queue, quit, done, r.sinceDue)
	if err == nil {
		err = r.senders(gctx, g, Queue, r.cfg.InFlight, r.cfg.Batch, stop, false)
	}
	if err != nil {
		g.cancel()
	}
	err = firstErr(g.Wait(), err)
	r.end = time.Now()
	return err
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// progress prints a line a second until the returned stop is called; the
// printing goroutine is owned by that stop.
func (r *run) progress(sent, recv *atomic.Int64) func() {
	w := r.cfg.Progress
	if w == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastS, lastR int64
		for s := 1; ; s++ {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			line := fmt.Sprintf("[%3ds] %s", s, r.cfg.Workload)
			if sent != nil {
				n := sent.Load()
				line += fmt.Sprintf("  sent %d (%d/s)", n, n-lastS)
				lastS = n
			}
			if recv != nil {
				n := recv.Load()
				line += fmt.Sprintf("  received %d (%d/s)", n, n-lastR)
				lastR = n
			}
			if r.hist.Count() > 0 {
				line += fmt.Sprintf("  p99 %.2fms", float64(r.hist.Quantile(0.99))/1e6)
			}
			io.WriteString(w, line+"\n")
		}
	}()
	return func() { close(quit); <-done }
}
