// Package load runs message-broker workloads — produce, consume, a queue
// round trip and fixed-rate end-to-end latency — against any broker that a
// Driver adapts. cmd/sluice-bench drives sluice with it, and bench/compare
// drives the peers with the same code, so every row of a comparison comes
// from one engine, with the same payloads, limits and clocks.
//
// Every run is bounded in both messages and time: whichever limit is hit
// first ends it.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"
)

// Kind is the shape of destination a workload needs.
type Kind int

const (
	// Log is an append-only stream read without deleting (a topic). A
	// driver without one uses its queue.
	Log Kind = iota
	// Queue hands each message to one consumer, which acks it by itself.
	Queue
)

// Msg is one delivered message; Handle is whatever the driver needs to ack
// it.
type Msg struct {
	Body   []byte
	Handle any
}

// Producer sends messages. It is used by one goroutine at a time.
type Producer interface {
	// Send returns once every body is acknowledged by the broker, i.e. as
	// durable as the broker's configuration makes an acknowledged message.
	// It must not keep bodies after it returns: the caller reuses them.
	Send(ctx context.Context, bodies [][]byte) error
	Close() error
}

// Consumer receives messages. It is used by one goroutine at a time.
type Consumer interface {
	// Receive returns up to limit messages, waiting at most about wait for
	// the first; none is an empty slice, not an error.
	Receive(ctx context.Context, limit int, wait time.Duration) ([]Msg, error)
	// Ack acknowledges each message individually (never a cumulative
	// offset past unseen messages), possibly in one call.
	Ack(ctx context.Context, msgs []Msg) error
	Close() error
}

// Driver adapts one broker (and one protocol of it).
type Driver interface {
	// Prepare creates the destination name, empty, replacing any earlier
	// one of that name.
	Prepare(ctx context.Context, name string, kind Kind) error
	// Producer and Consumer open the i-th client of name; a driver may
	// share connections between them.
	Producer(ctx context.Context, name string, kind Kind, i int) (Producer, error)
	Consumer(ctx context.Context, name string, kind Kind, i int) (Consumer, error)
	Close() error
}

// Workloads the engine runs.
const (
	Produce = "produce" // senders only; latency is send to ack
	Consume = "consume" // drain a backlog written first (untimed)
	RoundTp = "queue"   // send, receive and ack at once; latency is send to ack of the receipt
	Latency = "latency" // fixed rate; latency is from when each send was due to its receipt
)

// Config is one run.
type Config struct {
	Workload  string
	Name      string        // destination; created empty by Prepare
	Size      int           // bytes per message (at least MinSize)
	Count     int64         // at most this many messages
	Duration  time.Duration // and at most this long
	InFlight  int           // messages sent and not yet acknowledged, at most
	Batch     int           // messages per send call
	Consumers int           // receiving clients (consume, queue, latency)
	Prefetch  int           // messages per receive call / unacked per consumer
	Rate      int           // messages per second (latency)
	Queue     bool          // produce and consume use a queue, not a log
	Progress  io.Writer     // a line a second; nil for none
}

// MinSize is the smallest payload: two 19-digit numbers and separators.
const MinSize = 40

// Defaults fills the zero fields of c.
func (c *Config) Defaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&c.Size, 1024)
	def(&c.InFlight, 256)
	def(&c.Batch, 1)
	def(&c.Consumers, 4)
	def(&c.Prefetch, 64)
	def(&c.Rate, 5000)
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Count <= 0 {
		c.Count = 10_000_000
	}
	if c.Name == "" {
		c.Name = "bench-" + c.Workload
	}
}

// Validate rejects a config the engine cannot run.
func (c *Config) Validate() error {
	switch c.Workload {
	case Produce, Consume, RoundTp, Latency:
	default:
		return fmt.Errorf("unknown workload %q (produce, consume, queue, latency)", c.Workload)
	}
	if c.Size < MinSize {
		return fmt.Errorf("message size %d: at least %d bytes (the timestamp and sequence)", c.Size, MinSize)
	}
	if c.Size > MinSize+len(filler) {
		return fmt.Errorf("message size %d: at most %d bytes", c.Size, MinSize+len(filler))
	}
	if c.Batch > c.InFlight {
		return errors.New("batch larger than messages in flight")
	}
	return nil
}

// payload is a reusable message body: "<19-digit due unix ns> <19-digit
// seq> " then printable filler (SQS bodies must be text). Random filler
// keeps anything that compresses from looking better than it is.
type payload []byte

var filler = func() []byte {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return b
}()

func newPayload(size int) payload {
	p := make(payload, size)
	copy(p[MinSize:], filler[:size-MinSize])
	p[19], p[39] = ' ', ' '
	return p
}

// stamp writes the due time and sequence number into p.
func (p payload) stamp(due time.Time, seq int64) {
	putDigits(p[0:19], due.UnixNano())
	putDigits(p[20:39], seq)
}

func putDigits(dst []byte, v int64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}

// parseStamp reads the due time and sequence of a body the engine wrote.
func parseStamp(b []byte) (due time.Time, seq int64, ok bool) {
	if len(b) < MinSize {
		return time.Time{}, 0, false
	}
	ns, err1 := strconv.ParseInt(string(b[0:19]), 10, 64)
	seq, err2 := strconv.ParseInt(string(b[20:39]), 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, 0, false
	}
	return time.Unix(0, ns), seq, true
}
