package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// Pipelined produce requests.
//
// An idempotent Kafka producer keeps up to five produce requests in flight
// on its connection (franz-go and the Java client do), each usually holding
// a batch or two per partition. Handled one at a time, each request waits
// for its own fdatasync before the next is even read, so a record that
// joins the fifth request in line waits for five syncs. When a request is
// read, the requests already buffered behind it were sent while the
// previous one was being synced; producePipeline takes them with it, and
// handleProduces appends their batches per partition in one broker call:
// one sync for all of them (the broker appends consecutive batches of one
// producer together), then answers each request, in order.

// maxPipelined bounds how many produce requests are handled together.
const maxPipelined = 16

// producePipeline returns frame and the complete produce requests buffered
// right behind it, without blocking; just frame if it is not a produce
// request or nothing complete follows.
func (c *conn) producePipeline(frame []byte) [][]byte {
	frames := [][]byte{frame}
	if frameKey(frame) != 0 {
		return frames
	}
	for len(frames) < maxPipelined {
		if !c.frameBuffered() {
			break
		}
		hdr, err := c.br.Peek(4 + 2)
		if err != nil || int16(binary.BigEndian.Uint16(hdr[4:])) != 0 {
			break
		}
		next, err := c.readFrame()
		if err != nil {
			// Cannot happen with the whole frame buffered; if it did, the
			// connection is broken and the next read reports it.
			break
		}
		frames = append(frames, next)
	}
	return frames
}

// frameBuffered reports whether the whole next frame, of a valid size, is
// already buffered: reading it cannot block.
func (c *conn) frameBuffered() bool {
	if c.br.Buffered() < 4+minHeaderSize {
		return false
	}
	sz, err := c.br.Peek(4)
	if err != nil {
		return false
	}
	n := int32(binary.BigEndian.Uint32(sz))
	return n >= minHeaderSize && n <= c.s.cfg.MaxRequestBytes && c.br.Buffered() >= 4+int(n)
}

func frameKey(frame []byte) int16 {
	if len(frame) < 2 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(frame))
}

// pipedPart is one partition of one request of a pipeline.
type pipedPart struct {
	records []byte
	opts    broker.BatchOptions // of its request's version
	batches int
	rp      *kmsg.ProduceResponseTopicPartition
}

// handleProduces handles frames (produce requests, in the order read).
// Unless every one is a plain acks=1/all request of idempotent batches, they
// go through handle one by one, as any request does. Otherwise each
// partition's batches, request after request, go to the broker in one call;
// if that call fails, each request's batches are retried alone in order
// (the retry of a batch already stored is answered as a duplicate, with its
// offset), so a request is answered exactly as if it had been handled by
// itself.
func (c *conn) handleProduces(frames [][]byte) (err error) {
	type piped struct {
		h    reqHeader
		req  *kmsg.ProduceRequest
		resp *kmsg.ProduceResponse
	}
	start := time.Now() // each request of the pipeline waited for all of it
	reqs := make([]piped, 0, len(frames))
	for _, f := range frames {
		h, req, derr := decodeRequest(f)
		pr, ok := req.(*kmsg.ProduceRequest)
		if derr != nil || !ok || !c.resolveProduceIDs(pr) || !pipelinable(pr) || !c.mayProduceAll(pr) {
			for _, f := range frames {
				if err := c.handle(f); err != nil {
					return err
				}
			}
			return nil
		}
		reqs = append(reqs, piped{h: h, req: pr})
	}
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("kafka request handler panicked", "api", "Produce", "requests", len(reqs),
				"client_id", c.clientID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", errHandlerPanic, p)
		}
	}()
	type tp struct {
		topic string
		part  int32
	}
	parts := map[tp][]pipedPart{}
	var order []tp
	for i := range reqs {
		r := &reqs[i]
		if r.h.clientID != nil {
			c.clientID = *r.h.clientID
		}
		if hook := c.s.testHookHandling; hook != nil {
			hook(r.req)
		}
		r.resp = r.req.ResponseKind().(*kmsg.ProduceResponse)
		r.resp.Topics = make([]kmsg.ProduceResponseTopic, len(r.req.Topics))
		for j, t := range r.req.Topics {
			rt := &r.resp.Topics[j]
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
			for k, p := range t.Partitions {
				rp := &rt.Partitions[k]
				*rp = kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				key := tp{t.Topic, p.Partition}
				if _, seen := parts[key]; !seen {
					order = append(order, key)
				}
				parts[key] = append(parts[key], pipedPart{records: p.Records, opts: batchOptions(r.req), rp: rp})
			}
		}
	}
	var implicit []txnPart // transactional produce v12+: added in one step
	for _, key := range order {
		for _, pp := range parts[key] {
			if pp.opts.TxnImplicitAdd {
				implicit = append(implicit, txnPart{key.topic, key.part, pp.records})
				break
			}
		}
	}
	if len(implicit) > 0 {
		c.addTxnPartitions(implicit)
	}
	// Not cancelled by shutdown: an append that started must finish and be
	// answered, or a retry could store the batch twice.
	ctx, cancel := context.WithCancel(c.s.ctx)
	defer cancel()
	wctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for _, key := range order {
		pps := parts[key]
		wg.Go(func() { c.producePiped(wctx, key.topic, key.part, pps) })
	}
	wg.Wait()
	for _, r := range reqs {
		c.recordSpans(start, r.req, r.resp, nil)
		if err := c.writeMsg(r.h, r.req.IsFlexible(), r.resp); err != nil {
			return err
		}
		c.s.observe(r.h.key, start)
	}
	return nil
}

// mayProduceAll: every topic of req may be written; otherwise the request
// goes through handleProduce, which answers the refused partitions.
func (c *conn) mayProduceAll(req *kmsg.ProduceRequest) bool {
	if req.TransactionID != nil && !c.mayIdempotentQuiet() {
		return false
	}
	for _, t := range req.Topics {
		if !c.mayQuiet(auth.Produce, auth.Topic, t.Topic) {
			return false
		}
	}
	return true
}

// pipelinable: a request handleProduces may join with others. Only
// idempotent batches (transactional ones are too): their retry after a
// failed joint append is safe.
func pipelinable(req *kmsg.ProduceRequest) bool {
	if req.Acks != 1 && req.Acks != -1 {
		return false
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			bs, err := splitBatches(p.Records)
			if err != nil {
				return false
			}
			for _, b := range bs {
				if h, err := batch.ParseHeader(b); err != nil || h.ProducerID < 0 {
					return false
				}
			}
		}
	}
	return true
}

// producePiped appends one partition's batches of several requests in one
// broker call and answers each request's partition; if the call fails, each
// request's batches go alone, in order, as producePartition would.
func (c *conn) producePiped(ctx context.Context, topic string, part int32, pps []pipedPart) {
	alone := func() {
		for _, pp := range pps {
			c.producePartition(ctx, topic, part, pp.records, pp.rp, pp.opts)
		}
	}
	if len(pps) == 1 || slices.ContainsFunc(pps, func(pp pipedPart) bool { return pp.opts != pps[0].opts }) {
		alone() // requests of versions that differ in what they ask
		return
	}
	var all [][]byte
	for i := range pps {
		bs, _ := splitBatches(pps[i].records) // pipelinable checked them
		pps[i].batches = len(bs)
		all = append(all, bs...)
	}
	res, err := c.s.b.ProduceBatchesWith(ctx, topic, part, all, pps[0].opts)
	if err != nil {
		alone()
		return
	}
	at := 0
	for _, pp := range pps {
		pp.rp.BaseOffset = res.BaseOffsets[at]
		pp.rp.LogStartOffset = res.LogStartOffset
		pp.rp.LogAppendTime = -1
		at += pp.batches
	}
}
