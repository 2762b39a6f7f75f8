package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// A Publisher batches concurrent publishes to one topic or queue over a
// StreamService.Publish stream, as Pub/Sub's and NATS's clients do: Publish
// puts an entry in a bounded buffer and returns a future at once; the
// buffer goes out as requests of up to MaxBatch entries, each once a
// request slot is free (MaxInFlight) and the batch is full, or has
// gathered the senders the last answers released, or has waited long
// enough (Linger). The server answers each request once it is durable, and
// the answer resolves its entries' futures.
//
//	p := c.TopicPublisher("events", nil)
//	defer p.Close(ctx)
//	f, err := p.PublishRecord(ctx, &client.ProduceRecord{Value: body})
//	res, err := f.Wait(ctx) // res.GetRecord().GetOffset()
//
// A failed entry's future holds its own error (ErrMessageTooLarge,
// ErrPermissionDenied, a NOT_LEADER *Error naming the leader); if the stream
// breaks, every entry sent on it and not answered fails with the stream's
// error, whether or not the server stored it (retry, and expect a
// duplicate), and the next batch opens a new stream.

// PublishResult is one entry's outcome: GetRecord() for a topic,
// GetMessage() for a queue.
type PublishResult = sluicev1.PublishResult

// PublisherOptions tune a Publisher; nil or zero fields take the defaults.
type PublisherOptions struct {
	// MaxBatch is the entries of one request: default 128, at most 1000.
	// Smaller requests overlap better with the server's group commit: under
	// W1 (256 senders, 1 KiB, fsync always) 128 went 0.85-1.07x Kafka's
	// rate where 500 went 0.75-0.87x (docs/benchmarks.md); Kafka's own
	// batch.size is 16 KiB, Pub/Sub's 100 messages.
	MaxBatch int
	// MaxBatchBytes is the encoded bytes of one request's entries: default
	// 1 MiB (one entry larger than that goes alone).
	MaxBatchBytes int
	// Linger is how long a batch that is not full waits for more entries
	// before it goes. Default 0: adaptive. A batch goes as soon as a
	// request slot is free, unless answers just released senders that have
	// not published again yet: then it waits for them, at most half the
	// last request's round trip and never more than 250 µs (see
	// adaptiveWait). Negative: never wait.
	Linger time.Duration
	// MaxInFlight is the requests sent and not answered: default 8.
	MaxInFlight int
	// MaxPending and MaxPendingBytes bound the entries accepted and not yet
	// answered (the buffer): Publish waits past them. Defaults 10,000
	// entries and 64 MiB.
	MaxPending      int
	MaxPendingBytes int
	// RecordBatches sends a topic's records as one record batch per request
	// (stream.proto's RecordBatch), built here as Kafka's clients build
	// theirs, which the server stores without decoding each record: less
	// CPU a record on both sides. Only requests whose every record leaves
	// its partition to the server (no key, no partition) go so; the others
	// go as records. The server picks one partition per batch, as it does
	// for the unkeyed records of a request, and answers each batch with its
	// base offset (the futures' results carry partition and offset, no
	// timestamp: a record's is the one set here, or the time it was sent).
	// Needs a server that knows RecordBatch (sluice 2026-12 and later): an
	// older one refuses every such request as empty. Default off.
	RecordBatches bool
}

func (o *PublisherOptions) withDefaults() PublisherOptions {
	out := PublisherOptions{}
	if o != nil {
		out = *o
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&out.MaxBatch, 128)
	out.MaxBatch = min(out.MaxBatch, 1000)
	def(&out.MaxBatchBytes, 1<<20)
	def(&out.MaxInFlight, 8)
	def(&out.MaxPending, 10_000)
	def(&out.MaxPendingBytes, 64<<20)
	return out
}

// PublishFuture is one published entry's answer to come.
type PublishFuture struct {
	rec    *ProduceRecord
	msg    *SendEntry
	size   int
	sentAt time.Time // when its request went, on a request's first entry only
	done   chan struct{}
	res    *PublishResult
	err    error
}

// Done is closed once the entry is answered.
func (f *PublishFuture) Done() <-chan struct{} { return f.done }

// Wait returns the entry's result once it is durable, or why it failed.
func (f *PublishFuture) Wait(ctx context.Context) (*PublishResult, error) {
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *PublishFuture) resolve(res *PublishResult, err error) {
	f.res, f.err = res, err
	close(f.done)
}

// publishStream is the client side of a Publish stream (tests fake it).
type publishStream interface {
	Send(*sluicev1.PublishRequest) error
	Receive() (*sluicev1.PublishResponse, error)
	CloseRequest() error
	CloseResponse() error
}

// Publisher is safe for concurrent use. Close it to end its stream.
type Publisher struct {
	topic, queue string
	opts         PublisherOptions
	open         func(context.Context) publishStream
	afterFunc    func(time.Duration, func()) (stop func() bool)
	now          func() time.Time // the clock of the adaptive linger (tests fake it)

	mu           sync.Mutex
	cur          []*PublishFuture // accepted, not sent
	curBytes     int
	lingerTimer  func() bool   // stops the running linger timer; nil: none
	lingered     bool          // cur's oldest entry has waited Linger
	comeback     int           // entries answered since the last request went: senders that may publish again
	rtt          time.Duration // the last answered request's round trip
	answeredAt   time.Time     // when the last answer came
	inflight     int           // requests sent, not answered
	pending      int           // entries accepted, not answered
	pendingBytes int
	room         chan struct{} // closed and replaced when pending shrinks
	st           *pubStream
	nextID       uint64
	closed       bool
}

// TopicPublisher returns a Publisher of records to topic; opts may be nil.
func (c *Client) TopicPublisher(topic string, opts *PublisherOptions) *Publisher {
	return c.newPublisher(topic, "", opts)
}

// QueuePublisher returns a Publisher of messages to queue; opts may be nil.
func (c *Client) QueuePublisher(queue string, opts *PublisherOptions) *Publisher {
	return c.newPublisher("", queue, opts)
}

func (c *Client) newPublisher(topic, queue string, opts *PublisherOptions) *Publisher {
	open := func(ctx context.Context) publishStream { return c.stream.Publish(ctx) }
	return newPublisher(topic, queue, opts, open, realAfterFunc)
}

func realAfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

func newPublisher(topic, queue string, opts *PublisherOptions, open func(context.Context) publishStream,
	after func(time.Duration, func()) func() bool) *Publisher {
	return &Publisher{topic: topic, queue: queue, opts: opts.withDefaults(), open: open, afterFunc: after, now: time.Now,
		room: make(chan struct{})}
}

var errPublisherClosed = errors.New("sluice: publisher closed")

// PublishRecord queues rec for the topic; it waits only while the buffer
// is full. The future answers once the record is durable.
func (p *Publisher) PublishRecord(ctx context.Context, rec *ProduceRecord) (*PublishFuture, error) {
	if p.topic == "" {
		return nil, &Error{Code: connect.CodeInvalidArgument, Reason: "INVALID_ARGUMENT", Message: "a queue publisher takes messages (PublishMessage)"}
	}
	return p.publish(ctx, &PublishFuture{rec: rec, size: proto.Size(rec), done: make(chan struct{})})
}

// PublishMessage queues e for the queue, as PublishRecord does for a topic.
func (p *Publisher) PublishMessage(ctx context.Context, e *SendEntry) (*PublishFuture, error) {
	if p.queue == "" {
		return nil, &Error{Code: connect.CodeInvalidArgument, Reason: "INVALID_ARGUMENT", Message: "a topic publisher takes records (PublishRecord)"}
	}
	return p.publish(ctx, &PublishFuture{msg: e, size: proto.Size(e), done: make(chan struct{})})
}

func (p *Publisher) publish(ctx context.Context, f *PublishFuture) (*PublishFuture, error) {
	p.mu.Lock()
	for !p.closed && p.pending > 0 &&
		(p.pending+1 > p.opts.MaxPending || p.pendingBytes+f.size > p.opts.MaxPendingBytes) {
		room := p.room
		p.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPublisherClosed
	}
	p.pending++
	p.pendingBytes += f.size
	p.cur = append(p.cur, f)
	p.curBytes += f.size
	p.flushLocked()
	return f, nil
}

// flushLocked sends what the rules allow now: full batches, and a partial
// one without a linger or once it lingered, while request slots are free.
func (p *Publisher) flushLocked() {
	for !p.closed && len(p.cur) > 0 && p.inflight < p.opts.MaxInFlight {
		full := len(p.cur) >= p.opts.MaxBatch || p.curBytes >= p.opts.MaxBatchBytes
		if wait := p.lingerLocked(); !full && wait > 0 && !p.lingered {
			if p.lingerTimer == nil {
				p.lingerTimer = p.afterFunc(wait, p.lingerFired)
			}
			return
		}
		n, bytes := 0, 0
		for n < len(p.cur) && n < p.opts.MaxBatch && (n == 0 || bytes+p.cur[n].size <= p.opts.MaxBatchBytes) {
			bytes += p.cur[n].size
			n++
		}
		batch := p.cur[:n:n]
		p.cur = p.cur[n:]
		p.curBytes -= bytes
		if len(p.cur) == 0 {
			p.lingered = false
			if p.lingerTimer != nil {
				p.lingerTimer()
				p.lingerTimer = nil
			}
		}
		p.inflight++
		p.nextID++
		p.comeback = max(0, p.comeback-n)
		batch[0].sentAt = p.now()
		p.streamLocked().send(p.request(p.nextID, batch), batch)
	}
}

// maxAdaptiveLinger bounds the adaptive wait, as the server's group
// commit bounds its own (internal/linger's DefaultMax).
const maxAdaptiveLinger = 250 * time.Microsecond

// lingerLocked is how long a batch that is not full may wait now: Linger
// if set, else adaptiveWait's.
func (p *Publisher) lingerLocked() time.Duration {
	switch {
	case p.opts.Linger > 0:
		return p.opts.Linger
	case p.opts.Linger < 0:
		return 0
	}
	return p.adaptiveWait()
}

// adaptiveWait is the default linger. When answers come, the senders they
// release publish again within microseconds, one after another; sending
// at the first one's publish fills the free slot with a request of one
// entry, and the others wait in the buffer for the next answer, a whole
// round trip (an fsync) later: under W1 (256 senders, one entry each,
// fsync always) requests of a few entries, and 17 % more CPU a message
// for client and server than with this wait (docs/benchmarks.md, issue
// 19). So a batch waits until as many entries
// as the last answers released are back, until half a round trip and at
// most 250 µs after that answer: released senders that come back do so
// within microseconds of it, so the wait is counted from the answer, and
// a publish that comes later (a paced producer's) waits little or not at
// all. With nothing answered since the last request went (an idle
// publisher, or one whose senders all came back) it goes at once.
func (p *Publisher) adaptiveWait() time.Duration {
	if len(p.cur) >= p.comeback || p.rtt <= 0 {
		return 0
	}
	return min(p.rtt/2, maxAdaptiveLinger) - p.now().Sub(p.answeredAt)
}

func (p *Publisher) lingerFired() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lingerTimer = nil
	p.lingered = true
	p.flushLocked()
}

func (p *Publisher) request(id uint64, batch []*PublishFuture) *sluicev1.PublishRequest {
	req := &sluicev1.PublishRequest{Id: id}
	if p.topic != "" {
		req.Destination = &sluicev1.PublishRequest_Topic{Topic: p.topic}
		req.Records = make([]*ProduceRecord, len(batch))
		for i, f := range batch {
			req.Records[i] = f.rec
		}
		return req
	}
	req.Destination = &sluicev1.PublishRequest_Queue{Queue: p.queue}
	req.Messages = make([]*SendEntry, len(batch))
	for i, f := range batch {
		req.Messages[i] = f.msg
	}
	return req
}

// answered is called once per request sent, answered by the server or
// failed with its stream.
func (p *Publisher) answered(batch []*PublishFuture, byServer bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if byServer { // a failure's senders are not expected back soon, nor is its time a round trip
		p.comeback += len(batch)
		p.answeredAt = p.now()
		if t := batch[0].sentAt; !t.IsZero() {
			p.rtt = p.answeredAt.Sub(t)
		}
	}
	p.inflight--
	p.pending -= len(batch)
	for _, f := range batch {
		p.pendingBytes -= f.size
	}
	close(p.room)
	p.room = make(chan struct{})
	p.flushLocked()
}

// Flush sends everything accepted so far at once (no linger) and waits
// until all of it is answered.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	waitFor := append([]*PublishFuture(nil), p.cur...)
	p.lingered = len(p.cur) > 0
	p.flushLocked()
	st := p.st
	p.mu.Unlock()
	if st != nil {
		waitFor = append(waitFor, st.unanswered()...)
	}
	for _, f := range waitFor {
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close flushes, waits for every answer (or ctx), and ends the stream.
// Entries still unsent when ctx ends fail with an error; publishing after
// Close fails.
func (p *Publisher) Close(ctx context.Context) error {
	err := p.Flush(ctx)
	p.mu.Lock()
	p.closed = true
	close(p.room)
	p.room = make(chan struct{})
	unsent := p.cur
	p.cur, p.curBytes = nil, 0
	if p.lingerTimer != nil {
		p.lingerTimer()
		p.lingerTimer = nil
	}
	for _, f := range unsent {
		p.pending--
		p.pendingBytes -= f.size
	}
	st := p.st
	p.st = nil
	p.mu.Unlock()
	for _, f := range unsent {
		f.resolve(nil, errPublisherClosed)
	}
	if st != nil {
		st.close()
	}
	return err
}

// streamLocked is the open stream, opened on first use or after a failure.
func (p *Publisher) streamLocked() *pubStream {
	if p.st == nil || p.st.isDead() {
		var prepare func(*sluicev1.PublishRequest) *sluicev1.PublishRequest
		if p.opts.RecordBatches && p.topic != "" {
			prepare = func(r *sluicev1.PublishRequest) *sluicev1.PublishRequest { return asRecordBatch(r, p.now()) }
		}
		p.st = startPubStream(p.open, p.opts.MaxInFlight, prepare, p.answered)
	}
	return p.st
}
