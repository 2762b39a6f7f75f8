package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one run's outcome, as `--output json` prints it.
type Result struct {
	Workload   string  `json:"workload"`
	Target     string  `json:"target,omitempty"` // set by the caller: broker, protocol, settings
	Size       int     `json:"size"`
	InFlight   int     `json:"in_flight"`
	Batch      int     `json:"batch"`
	Consumers  int     `json:"consumers,omitempty"`
	Prefetch   int     `json:"prefetch,omitempty"`
	Rate       int     `json:"rate,omitempty"`
	Sent       int64   `json:"sent"`
	Received   int64   `json:"received"`
	Missing    int64   `json:"missing"` // latency: sent but not received when the run ended
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_sec"` // sends for produce, acked receipts otherwise
	MBPerSec   float64 `json:"mb_per_sec"`
	Latency    Summary `json:"latency"`
	// AckLatency (latency workload only) times each send from when it was due to
	// the return of its acknowledgement: the producer's half of Latency, so a
	// tail can be placed on the sending or the delivering side.
	AckLatency *Summary `json:"ack_latency,omitempty"`
}

// grace bounds how long calls still in flight at the end of a run may take
// to finish, and how long the latency run waits for its last messages.
const grace = 5 * time.Second

// Run runs cfg against d. Defaults must have been applied.
func Run(ctx context.Context, d Driver, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, d: d}
	var err error
	switch cfg.Workload {
	case Produce:
		err = r.produce(ctx)
	case Consume:
		err = r.consume(ctx)
	case RoundTp:
		err = r.roundTrip(ctx)
	case Latency:
		err = r.latency(ctx)
	}
	return r.result(), err
}

// run is the state one workload shares between its goroutines.
type run struct {
	cfg        Config
	d          Driver
	hist       Hist
	ackHist    Hist   // latency: due to acknowledged send
	what       string // what the histogram measures
	sent, recv atomic.Int64
	claimed    atomic.Int64
	limit      int64 // messages to send
	start, end time.Time
	counted    *atomic.Int64 // the counter msgs/s is computed from
	atReceipt  bool          // time a message when received, not when its ack returned
}

func (r *run) result() Result {
	c := r.cfg
	res := Result{Workload: c.Workload, Size: c.Size, InFlight: c.InFlight, Batch: c.Batch,
		Sent: r.sent.Load(), Received: r.recv.Load(), Latency: r.hist.Summarize(r.what)}
	if c.Workload != Produce {
		res.Consumers, res.Prefetch = c.Consumers, c.Prefetch
	}
	if c.Workload == Latency {
		res.Rate, res.Missing = c.Rate, max(0, res.Sent-res.Received)
		ack := r.ackHist.Summarize("due to acknowledged send")
		res.AckLatency = &ack
	}
	if r.end.IsZero() {
		r.end = time.Now()
	}
	if !r.start.IsZero() && r.counted != nil {
		res.Seconds = r.end.Sub(r.start).Seconds()
		n := float64(r.counted.Load())
		res.MsgsPerSec = n / max(res.Seconds, 1e-9)
		res.MBPerSec = res.MsgsPerSec * float64(c.Size) / 1e6
	}
	return res
}

// claim reserves up to n sequence numbers below the limit.
func (r *run) claim(n int) (first int64, got int) {
	end := r.claimed.Add(int64(n))
	first = end - int64(n)
	if first >= r.limit {
		return 0, 0
	}
	return first, int(min(end, r.limit) - first)
}

// group runs goroutines, keeps the first error, and cancels the others'
// context on it; Wait is the owner's join.
type group struct {
	wg     sync.WaitGroup
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func newGroup(ctx context.Context) (*group, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	return &group{cancel: cancel}, ctx
}

func (g *group) Go(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.once.Do(func() { g.err = err; g.cancel() })
		}
	}()
}

func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err
}

// senders starts ceil(inFlight/batch) goroutines in g, each with its own
// Producer, sending batches until the limit or stop. The latency recorded
// is from each send's start to its ack when record is true.
func (r *run) senders(ctx context.Context, g *group, kind Kind, inFlight, batch int, stop time.Time, record bool) error {
	workers := (inFlight + batch - 1) / batch
	for i := range workers {
		p, err := r.d.Producer(ctx, r.cfg.Name, kind, i)
		if err != nil {
			return fmt.Errorf("producer %d: %w", i, err)
		}
		g.Go(func() error {
			defer p.Close()
			return r.sendLoop(ctx, p, batch, stop, record)
		})
	}
	return nil
}

func (r *run) sendLoop(ctx context.Context, p Producer, batch int, stop time.Time, record bool) error {
	pls := make([]payload, batch)
	bodies := make([][]byte, batch)
	for i := range pls {
		pls[i] = newPayload(r.cfg.Size)
		bodies[i] = pls[i]
	}
	for time.Now().Before(stop) && ctx.Err() == nil {
		first, n := r.claim(batch)
		if n == 0 {
			return nil
		}
		t0 := time.Now()
		for i := range n {
			pls[i].stamp(t0, first+int64(i))
		}
		if err := p.Send(ctx, bodies[:n]); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		if record {
			r.hist.RecordN(time.Since(t0), n)
		}
		r.sent.Add(int64(n))
	}
	return nil
}

// receivers starts cfg.Consumers goroutines in g, each receiving and acking
// until quit is closed or done reports true. onMsg runs for each message
// once its ack returned, with the time the ack returned (or, with
// r.atReceipt, the time it was received), and says whether it counts (a
// warm-up message does not).
func (r *run) receivers(ctx context.Context, g *group, kind Kind, quit <-chan struct{}, done func() bool, onMsg func(m Msg, at time.Time) bool) error {
	for i := range r.cfg.Consumers {
		c, err := r.d.Consumer(ctx, r.cfg.Name, kind, i)
		if err != nil {
			return fmt.Errorf("consumer %d: %w", i, err)
		}
		g.Go(func() error {
			defer c.Close()
			return r.receiveLoop(ctx, c, quit, done, onMsg)
		})
	}
	return nil
}

func (r *run) receiveLoop(ctx context.Context, c Consumer, quit <-chan struct{}, done func() bool, onMsg func(Msg, time.Time) bool) error {
	for ctx.Err() == nil && !done() {
		select {
		case <-quit:
			return nil
		default:
		}
		ms, err := c.Receive(ctx, r.cfg.Prefetch, 100*time.Millisecond)
		if err != nil {
			return ignoreEnd(ctx, fmt.Errorf("receive: %w", err))
		}
		if len(ms) == 0 {
			continue
		}
		now := time.Now()
		if err := c.Ack(ctx, ms); err != nil {
			return ignoreEnd(ctx, fmt.Errorf("ack: %w", err))
		}
		if !r.atReceipt {
			now = time.Now()
		}
		var n int64
		for _, m := range ms {
			if onMsg(m, now) {
				n++
			}
		}
		r.recv.Add(n)
	}
	return nil
}

// ignoreEnd drops an error caused by the run's own end (its context done).
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// sinceDue records the latency of m from the due time in its payload;
// warm-up messages are neither timed nor counted.
func (r *run) sinceDue(m Msg, at time.Time) bool {
	due, _, ok := parseStamp(m.Body)
	if ok && due.Equal(warmUp) {
		return false
	}
	if ok {
		r.hist.Record(at.Sub(due))
	}
	return true
}
