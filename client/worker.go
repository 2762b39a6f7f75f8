package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Handler processes one message. Returning nil acks it; an error (or a
// panic) nacks it with a backoff delay, so it is retried and, after the
// queue's max receives, dead-lettered. ctx ends when the worker is stopped
// hard or the message's lease was lost (another consumer may have it).
type Handler func(ctx context.Context, m *Message) error

// Worker runs a Handler over a queue with N concurrent handlers, a prefetch
// buffer, automatic visibility extension while a message is held, nack with
// exponential backoff and jitter on failure, and a graceful Stop.
type Worker struct {
	c     *Client
	queue string
	h     Handler
	cfg   workerConfig

	mu             sync.Mutex // guards the fields below
	started        bool
	stopping       chan struct{} // closed by Stop: receive no more
	done           chan struct{} // closed when Run returns
	cancelHandlers context.CancelFunc

	hooks workerHooks // tests observe extensions through these
}

type workerHooks struct {
	extended func(m *Message)
}

type workerConfig struct {
	concurrency int
	prefetch    int
	visibility  time.Duration
	minBackoff  time.Duration
	maxBackoff  time.Duration
	onError     func(m *Message, err error)
	jitter      func(time.Duration) time.Duration
}

// WorkerOption configures NewWorker.
type WorkerOption func(*workerConfig)

// Concurrency runs n handlers at once (default 1).
func Concurrency(n int) WorkerOption { return func(c *workerConfig) { c.concurrency = max(1, n) } }

// Prefetch holds up to n received messages beyond the running handlers, so
// a free handler starts without a round trip (default: as many as handlers).
func Prefetch(n int) WorkerOption { return func(c *workerConfig) { c.prefetch = max(0, n) } }

// LeaseDuration is the visibility each delivery gets and each extension
// renews (default: the queue's visibility timeout). Extensions happen every
// half lease while a message is held.
func LeaseDuration(d time.Duration) WorkerOption { return func(c *workerConfig) { c.visibility = d } }

// Backoff bounds the nack delay after a failure: min doubled per previous
// receive, capped at max, with jitter (defaults 1s and 5m).
func Backoff(min, max time.Duration) WorkerOption {
	return func(c *workerConfig) { c.minBackoff, c.maxBackoff = min, max }
}

// OnError is told about failures the worker handles itself: handler
// errors and panics, failed acks, nacks, extensions and receives.
func OnError(fn func(m *Message, err error)) WorkerOption {
	return func(c *workerConfig) { c.onError = fn }
}

// NewWorker returns a worker for queue; Run starts it.
func (c *Client) NewWorker(queue string, h Handler, opts ...WorkerOption) *Worker {
	cfg := workerConfig{concurrency: 1, prefetch: -1, minBackoff: time.Second, maxBackoff: 5 * time.Minute,
		onError: func(*Message, error) {}, jitter: equalJitter}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.prefetch < 0 {
		cfg.prefetch = cfg.concurrency
	}
	return &Worker{c: c, queue: queue, h: h, cfg: cfg, stopping: make(chan struct{}), done: make(chan struct{})}
}

// PanicError is what a handler's panic is reported as (and nacked with).
type PanicError struct{ Value any }

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// Run receives and handles messages until ctx ends, Stop is called, or the
// queue turns out not to exist (returned as ErrQueueNotFound). It returns
// only after every handler it started has finished and been acked or
// nacked. A Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("sluice worker: Run called twice")
	}
	w.started = true
	hctx, cancel := context.WithCancel(ctx)
	w.cancelHandlers = cancel
	w.mu.Unlock()
	defer close(w.done)
	defer cancel()

	// recvCtx ends on Stop as well as with ctx; the goroutine is owned by
	// Run and ends with it (cancelRecv).
	recvCtx, cancelRecv := context.WithCancel(ctx)
	defer cancelRecv()
	go func() {
		select {
		case <-w.stopping:
			cancelRecv()
		case <-recvCtx.Done():
		}
	}()

	jobs := make(chan *job, w.cfg.concurrency+w.cfg.prefetch)
	slots := make(chan struct{}, w.cfg.concurrency+w.cfg.prefetch)
	var wg sync.WaitGroup
	for range w.cfg.concurrency {
		wg.Go(func() { w.handleLoop(hctx, recvCtx, jobs, slots) })
	}
	err := w.fetchLoop(recvCtx, hctx, jobs, slots)
	close(jobs)
	wg.Wait()
	return err
}

// Stop stops receiving and waits until the handlers in flight have finished
// and their messages are acked or nacked; prefetched messages not yet
// started are released at once. If ctx ends first, the handlers' contexts
// are cancelled and Stop returns ctx's error without waiting further.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	select {
	case <-w.stopping:
	default:
		close(w.stopping)
	}
	started, cancel := w.started, w.cancelHandlers
	w.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	}
}

// fetchLoop receives as many messages as there are free slots (handlers
// plus prefetch), and queues them for the handlers.
func (w *Worker) fetchLoop(recvCtx, hctx context.Context, jobs chan<- *job, slots chan struct{}) error {
	failures := 0
	for {
		select {
		case slots <- struct{}{}:
		case <-recvCtx.Done():
			return nil
		}
		n := 1
		for n < cap(slots) && n < 100 && trySend(slots) {
			n++
		}
		opts := []ReceiveOption{MaxMessages(n), Wait(20 * time.Second)}
		if w.cfg.visibility > 0 {
			opts = append(opts, Visibility(w.cfg.visibility))
		}
		msgs, err := w.c.Receive(recvCtx, w.queue, opts...)
		for range n - len(msgs) {
			<-slots
		}
		if recvCtx.Err() != nil {
			w.release(msgs)
			return nil
		}
		if err != nil {
			if errors.Is(err, ErrQueueNotFound) || errors.Is(err, ErrInvalidName) || errors.Is(err, ErrInvalidArgument) {
				return err
			}
			w.cfg.onError(nil, fmt.Errorf("receive: %w", err))
			failures++
			if !sleepCtx(recvCtx, w.backoff(failures)) {
				return nil
			}
			continue
		}
		failures = 0
		for _, m := range msgs {
			jobs <- w.hold(hctx, m)
		}
	}
}

func trySend(ch chan struct{}) bool {
	select {
	case ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// release nacks messages that were received but will not be handled.
func (w *Worker) release(msgs []*Message) {
	for _, m := range msgs {
		w.settle(m, nil, false)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
