package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/bench/compare/load"
	"github.com/sluice-mq/sluice/client"
)

// nativeDriver runs the bench over the native API with the Go client.
// Topics serve the log workloads, queues the others.
type nativeDriver struct {
	c *client.Client
	benchShape
	// stream: sends go through one shared Publisher per destination
	// (StreamService.Publish, batched across the senders) and queue
	// consumers ack on their Consume stream; false: one unary call per
	// send and AckBatch, as before the streams existed (--native-unary).
	stream bool
	// batches: the topic Publishers send record batches (--native-batches).
	batches bool
	mu      sync.Mutex
	pubs    map[string]*client.Publisher
}

// benchShape is what drivers need to know of the run beyond one call.
type benchShape struct {
	partitions int32 // of a topic the driver creates
	// replication is the replication factor of a Kafka topic the driver creates (a
	// cluster's; 1 on a single node).
	replication int16
	consumers   int // consumer i reads partitions i, i+consumers, …
	prefetch    int // unacked deliveries a queue consumer holds
	// tls, when set, is the client side of every connection (--tls-ca):
	// the run goes to the broker's TLS listeners.
	tls *tls.Config
}

func newNativeDriver(server string, shape benchShape, gzip, stream, batches bool) *nativeDriver {
	// One keep-alive connection per message in flight: the default
	// transport keeps only two idle per host, and 256 senders would
	// otherwise open and close connections all run long.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, 1024 // 0: no cap on idle connections overall
	if shape.tls != nil {
		t.TLSClientConfig = shape.tls.Clone()
	}
	// The streams need HTTP/2 (h2c for http://): a transport of their own,
	// with the same TLS trust.
	h2 := http.DefaultTransport.(*http.Transport).Clone()
	h2.Protocols = new(http.Protocols)
	h2.Protocols.SetHTTP2(true)
	h2.Protocols.SetUnencryptedHTTP2(true)
	if shape.tls != nil {
		h2.TLSClientConfig = shape.tls.Clone()
	}
	opts := []client.Option{client.WithHTTPClient(&http.Client{Transport: t}), client.WithStreamHTTPClient(&http.Client{Transport: h2})}
	if !gzip {
		// Without gzip among the accepted encodings the server sends
		// responses as they are: what compression costs is measurable.
		opts = append(opts, client.WithConnectOptions(connect.WithAcceptCompression("gzip", nil, nil)))
	}
	return &nativeDriver{c: client.New(server, opts...), benchShape: shape, stream: stream, batches: batches, pubs: map[string]*client.Publisher{}}
}

func (d *nativeDriver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, p := range d.pubs {
		errs = append(errs, p.Close(ctx))
	}
	d.pubs = map[string]*client.Publisher{}
	return errors.Join(errs...)
}

// publisher is the shared Publisher of name, made on first use.
func (d *nativeDriver) publisher(name string, log bool) *client.Publisher {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := fmt.Sprint(log, "/", name)
	p := d.pubs[key]
	if p == nil {
		if log {
			p = d.c.TopicPublisher(name, &client.PublisherOptions{RecordBatches: d.batches})
		} else {
			p = d.c.QueuePublisher(name, nil)
		}
		d.pubs[key] = p
	}
	return p
}

func (d *nativeDriver) Prepare(ctx context.Context, name string, kind load.Kind) error {
	if kind == load.Log {
		if err := d.c.DeleteTopic(ctx, name); err != nil && !errors.Is(err, client.ErrTopicNotFound) {
			return err
		}
		_, err := d.c.CreateTopic(ctx, name, &client.TopicConfig{Partitions: d.partitions})
		return err
	}
	if err := d.c.DeleteQueue(ctx, name); err != nil && !errors.Is(err, client.ErrQueueNotFound) {
		return err
	}
	_, err := d.c.CreateQueue(ctx, name, nil)
	return err
}

func (d *nativeDriver) Producer(_ context.Context, name string, kind load.Kind, _ int) (load.Producer, error) {
	if d.stream {
		return &streamProducer{p: d.publisher(name, kind == load.Log), log: kind == load.Log}, nil
	}
	return &nativeProducer{c: d.c, name: name, log: kind == load.Log}, nil
}

// streamProducer hands each body to the shared Publisher and waits for
// every answer: the load engine's senders are what the Publisher batches.
type streamProducer struct {
	p   *client.Publisher
	log bool
}

func (p *streamProducer) Close() error { return nil }

func (p *streamProducer) Send(ctx context.Context, bodies [][]byte) error {
	fs := make([]*client.PublishFuture, 0, len(bodies))
	for _, b := range bodies {
		var f *client.PublishFuture
		var err error
		if p.log {
			f, err = p.p.PublishRecord(ctx, &client.ProduceRecord{Value: b})
		} else {
			f, err = p.p.PublishMessage(ctx, client.Entry(b))
		}
		if err != nil {
			return err
		}
		fs = append(fs, f)
	}
	for _, f := range fs {
		if _, err := f.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

type nativeProducer struct {
	c    *client.Client
	name string
	log  bool
}

func (p *nativeProducer) Close() error { return nil }

func (p *nativeProducer) Send(ctx context.Context, bodies [][]byte) error {
	if p.log {
		recs := make([]*client.ProduceRecord, len(bodies))
		for i, b := range bodies {
			recs[i] = &client.ProduceRecord{Value: b}
		}
		_, err := p.c.Produce(ctx, p.name, recs, nil)
		return err
	}
	if len(bodies) == 1 {
		_, err := p.c.Send(ctx, p.name, bodies[0])
		return err
	}
	for len(bodies) > 0 { // SendBatch takes up to 100
		n := min(len(bodies), 100)
		entries := make([]*client.SendEntry, n)
		for i, b := range bodies[:n] {
			entries[i] = client.Entry(b)
		}
		if _, err := p.c.SendBatch(ctx, p.name, entries); err != nil {
			return err
		}
		bodies = bodies[n:]
	}
	return nil
}

func (d *nativeDriver) Consumer(ctx context.Context, name string, kind load.Kind, i int) (load.Consumer, error) {
	if kind == load.Log {
		// Consumer i reads partitions i, i+n, … from the start; a consumer
		// with none only waits.
		var parts []*client.PartitionOffset
		for p := int32(i); p < d.partitions; p += int32(d.consumers) {
			parts = append(parts, &client.PartitionOffset{Partition: p})
		}
		return &nativeLogConsumer{c: d.c, name: name, parts: parts}, nil
	}
	if d.stream {
		return newAckedQueueConsumer(ctx, d.c, name, d.prefetch)
	}
	return newNativeQueueConsumer(ctx, d.c, name, d.prefetch), nil
}

// nativeLogConsumer fetches its partitions from where it last stopped.
type nativeLogConsumer struct {
	c     *client.Client
	name  string
	parts []*client.PartitionOffset
}

func (c *nativeLogConsumer) Close() error                          { return nil }
func (c *nativeLogConsumer) Ack(context.Context, []load.Msg) error { return nil }

func (c *nativeLogConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	if len(c.parts) == 0 {
		time.Sleep(wait)
		return nil, nil
	}
	res, err := c.c.Fetch(ctx, &client.FetchRequest{Topic: c.name, Partitions: c.parts,
		MaxRecords: int32(limit), MaxWait: durationpb.New(wait)})
	if err != nil {
		return nil, err
	}
	var out []load.Msg
	for _, pr := range res.GetPartitions() {
		for _, po := range c.parts {
			if po.Partition == pr.GetPartition() && pr.GetError() == nil && pr.GetNextOffset() > po.Offset {
				po.Offset = pr.GetNextOffset()
			}
		}
		for _, r := range pr.GetRecords() {
			out = append(out, load.Msg{Body: r.GetValue()})
		}
	}
	return out, nil
}

// nativeQueueConsumer reads a Consume stream (the server pushes up to
// prefetch unacked deliveries) and acks with AckBatch, each receipt by
// itself. The stream's goroutine is owned by Close.
type nativeQueueConsumer struct {
	c      *client.Client
	name   string
	msgs   chan load.Msg
	errc   chan error
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newNativeQueueConsumer(ctx context.Context, c *client.Client, name string, prefetch int) *nativeQueueConsumer {
	ctx, cancel := context.WithCancel(ctx)
	q := &nativeQueueConsumer{c: c, name: name, msgs: make(chan load.Msg, 1024), errc: make(chan error, 1), cancel: cancel}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		for m, err := range c.Consume(ctx, name, client.MaxMessages(prefetch), client.Visibility(time.Minute)) {
			if err != nil {
				q.errc <- err
				return
			}
			select {
			case q.msgs <- load.Msg{Body: m.GetBody(), Handle: m.GetReceipt()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return q
}

func (q *nativeQueueConsumer) Close() error {
	q.cancel()
	q.wg.Wait()
	return nil
}

func (q *nativeQueueConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	return takePushed(ctx, q.msgs, q.errc, limit, wait)
}

func (q *nativeQueueConsumer) Ack(ctx context.Context, msgs []load.Msg) error {
	for len(msgs) > 0 { // AckBatch takes up to 100
		n := min(len(msgs), 100)
		receipts := make([]string, n)
		for i, m := range msgs[:n] {
			receipts[i] = m.Handle.(string)
		}
		errs, err := q.c.AckBatch(ctx, q.name, receipts)
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
