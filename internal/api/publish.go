package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-mq/sluice/internal/auth"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// StreamService.Publish (stream.proto), in three stages joined by bounded
// queues. A reader reads requests. A placer takes whatever has been read —
// the requests that arrived while it was busy — and hands each run of
// requests for one destination to the broker with one call, which gives
// the records their offsets and queues them for the partition's next group
// commit without waiting for it (broker.PlaceProduce). The handler's
// goroutine waits for each placed run to be durable and answers, in
// request order. So while one group of a stream is being written and
// synced, the next requests are read and placed already and join the
// following group: the syncer starts it as soon as the last fsync ends,
// instead of after the answers went out and the next requests were stored
// (the serial loop before this one left the disk idle for that turn). The
// log keeps the stream's order, as one goroutine places every run in
// order, and an answer never leaves before every entry it reports is
// durable. A run for a queue is sent and waited for by the placer itself:
// the queue's send path has no such split, so queue runs stay one at a
// time as before.

// Limits of a Publish stream.
const (
	// maxPublishEntries bounds the records or messages of one request.
	maxPublishEntries = 1000
	// publishAheadBytes bounds what one stream has read and not answered
	// yet; past it the server stops reading and HTTP/2 flow control holds
	// the client back. A single larger request (up to MaxRequestBytes) is
	// still taken when nothing else is pending.
	publishAheadBytes = 8 << 20
	// publishAheadRequests bounds the same in requests.
	publishAheadRequests = 256
	// publishMergeEntries bounds the entries stored by one broker call.
	publishMergeEntries = 4096
)

type streamService struct{ *API }

// pendingPublish is a request read and not answered yet.
type pendingPublish struct {
	req  *sluicev1.PublishRequest
	size int64
}

// placedPublish is a batch of requests placed in the broker: their
// answers, of which waits fill the stored entries' results once durable.
type placedPublish struct {
	batch []pendingPublish
	out   []*sluicev1.PublishResponse
	waits []func(context.Context)
}

func (s *streamService) Publish(ctx context.Context, stream *connect.BidiStream[sluicev1.PublishRequest, sluicev1.PublishResponse]) error {
	ctx, cancel := context.WithCancel(ctx)
	win := newByteWindow(publishAheadBytes)
	slots := make(chan struct{}, publishAheadRequests) // one per request read and not answered
	reqs := make(chan pendingPublish, publishAheadRequests)
	placed := make(chan placedPublish, publishAheadRequests)
	readErr := make(chan error, 1)
	// The reader is not waited for: it ends when the body does, which the
	// handler's return brings about, and ctx stops it between requests.
	go func() { readErr <- s.readPublishes(ctx, stream, win, slots, reqs) }()
	// The placer is waited for, so no broker call of the stream outlives
	// the handler (a drain returns from it and the server then closes the
	// broker); ctx ends its waits.
	placerDone := make(chan struct{})
	go func() {
		defer close(placerDone)
		s.placePublishes(ctx, reqs, placed)
	}()
	defer func() {
		cancel()
		<-placerDone
	}()
	cork := corkOf(ctx)
	for {
		var pp placedPublish
		var ok bool
		select {
		case pp, ok = <-placed:
		case <-s.draining:
			// Shutting down: what was answered is stored; what was placed
			// and not answered may be, and fails with the stream at the
			// client (which must then expect either).
			return nil
		}
		if !ok {
			select {
			case err := <-readErr:
				return err
			case <-ctx.Done():
				return nil
			}
		}
		resps := pp.finish(ctx)
		// One flush for the batch's answers (cork.go), not one each.
		cork.cork()
		for i, resp := range resps {
			if err := stream.Send(resp); err != nil {
				cork.uncork()
				return nil // the client went away; what is stored stays stored
			}
			win.release(pp.batch[i].size)
			<-slots
		}
		cork.uncork()
	}
}

// placePublishes takes the requests read, as many as have come (up to
// publishMergeEntries entries), places them and hands them on to be
// answered, until reqs is closed (the client closed its side or the
// stream failed), ctx ends or the server drains.
func (s *streamService) placePublishes(ctx context.Context, reqs <-chan pendingPublish, out chan<- placedPublish) {
	defer close(out)
	for {
		var p pendingPublish
		var ok bool
		select {
		case p, ok = <-reqs:
		case <-ctx.Done():
			return
		case <-s.draining:
			return
		}
		if !ok {
			return
		}
		batch := []pendingPublish{p}
		entries := publishEntries(p.req)
	more:
		for entries < publishMergeEntries {
			select {
			case q, ok := <-reqs:
				if !ok {
					break more
				}
				batch = append(batch, q)
				entries += publishEntries(q.req)
			default:
				break more
			}
		}
		select {
		case out <- s.placeBatch(ctx, batch):
		case <-ctx.Done():
			return
		}
	}
}

// readPublishes reads requests until the client closes its side (nil) or
// the stream fails (the error), waiting for a request slot and room in win
// before passing each on.
func (s *streamService) readPublishes(ctx context.Context, stream *connect.BidiStream[sluicev1.PublishRequest, sluicev1.PublishResponse],
	win *byteWindow, slots chan<- struct{}, out chan<- pendingPublish) error {
	defer close(out)
	for {
		req, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := int64(proto.Size(req))
		if !win.acquire(ctx, n) {
			return nil
		}
		select {
		case out <- pendingPublish{req, n}:
		case <-ctx.Done():
			return nil
		}
	}
}

// publishEntries is the entries a request is answered with: its records,
// messages, and the records of its batches (a batch that does not parse
// counts none; checkPublish refuses it).
func publishEntries(r *sluicev1.PublishRequest) int {
	n := len(r.GetRecords()) + len(r.GetMessages())
	for _, b := range r.GetBatches() {
		k, _ := batchRecords(b)
		n += k
	}
	return n
}

// publishBatch answers every request of batch, in order, once durable.
func (s *streamService) publishBatch(ctx context.Context, batch []pendingPublish) []*sluicev1.PublishResponse {
	return s.placeBatch(ctx, batch).finish(ctx)
}

// finish waits for the batch's placed runs to be durable, in order, and
// returns its answers, complete.
func (p placedPublish) finish(ctx context.Context) []*sluicev1.PublishResponse {
	for _, wait := range p.waits {
		wait(ctx)
	}
	return p.out
}

// placeBatch checks every request of batch, places each run of
// consecutive accepted requests for one destination with one broker call,
// and answers at once those that need no wait (refused, or sent to a
// queue).
func (s *streamService) placeBatch(ctx context.Context, batch []pendingPublish) placedPublish {
	pp := placedPublish{batch: batch, out: make([]*sluicev1.PublishResponse, len(batch))}
	out := pp.out
	var run []int // indexes of batch: consecutive accepted requests for one destination
	flush := func() {
		if len(run) == 0 {
			return
		}
		reqs := make([]*sluicev1.PublishRequest, len(run))
		resps := make([]*sluicev1.PublishResponse, len(run))
		for i, j := range run {
			reqs[i], resps[i] = batch[j].req, out[j]
		}
		if t, ok := reqs[0].GetDestination().(*sluicev1.PublishRequest_Topic); ok && len(reqs[0].GetBatches()) > 0 {
			pp.waits = append(pp.waits, s.batchRun(ctx, t.Topic, reqs, resps)...)
		} else if ok {
			if wait := s.produceRun(ctx, t.Topic, reqs, resps); wait != nil {
				pp.waits = append(pp.waits, wait)
			}
		} else {
			s.sendRun(ctx, reqs[0].GetQueue(), reqs, resps)
		}
		run = run[:0]
	}
	for i, p := range batch {
		resp := &sluicev1.PublishResponse{Id: p.req.GetId()}
		out[i] = resp
		if err := checkPublish(p.req); err != nil {
			flush()
			resp.Error = publishError(s.API, err)
			continue
		}
		if len(p.req.GetBatches()) > 0 {
			resp.BatchResults = batchResults(p.req)
		} else {
			resp.Results = make([]*sluicev1.PublishResult, publishEntries(p.req))
		}
		if err := s.allowedPublish(ctx, p.req); err != nil {
			flush()
			failAll(resp, publishError(s.API, err))
			continue
		}
		if len(run) > 0 && !sameDestination(batch[run[0]].req, p.req) {
			flush()
		}
		run = append(run, i)
	}
	flush()
	return pp
}

// checkPublish refuses a request that is malformed as a whole.
func checkPublish(r *sluicev1.PublishRequest) error {
	meta := map[string]string{"id": fmt.Sprint(r.GetId())}
	recs, msgs := len(r.GetRecords()), len(r.GetMessages())
	switch r.GetDestination().(type) {
	case *sluicev1.PublishRequest_Topic:
		if msgs > 0 {
			return invalidArg(ReasonInvalidArgument, "messages", "a request for a topic carries records, not messages", meta)
		}
		n, err := checkBatches(r, meta)
		if err != nil {
			return err
		}
		recs += n
	case *sluicev1.PublishRequest_Queue:
		if recs > 0 || len(r.GetBatches()) > 0 {
			return invalidArg(ReasonInvalidArgument, "records", "a request for a queue carries messages, not records", meta)
		}
	default:
		return invalidArg(ReasonInvalidArgument, "destination", "name a topic or a queue", meta)
	}
	if n := recs + msgs; n == 0 || n > maxPublishEntries {
		return invalidArg(ReasonInvalidArgument, "entries", fmt.Sprintf("%d entries: want 1 to %d", n, maxPublishEntries), meta)
	}
	return nil
}

// allowedPublish is the request's authorization: the stream's caller must
// be allowed to produce to its destination (authz_rules.go leaves the
// stream's messages to the handler, as each names its own destination).
func (s *streamService) allowedPublish(ctx context.Context, r *sluicev1.PublishRequest) error {
	if !s.auth.Enabled() {
		return nil
	}
	if t, ok := r.GetDestination().(*sluicev1.PublishRequest_Topic); ok {
		return s.allowed(ctx, auth.Produce, topicRes(t.Topic))
	}
	return s.allowed(ctx, auth.Produce, queueRes(r.GetQueue()))
}

// sameDestination reports whether b may join a's run: the same topic or
// queue, and for a topic the same kind of entries (records or batches).
func sameDestination(a, b *sluicev1.PublishRequest) bool {
	if (len(a.GetBatches()) > 0) != (len(b.GetBatches()) > 0) {
		return false
	}
	switch d := a.GetDestination().(type) {
	case *sluicev1.PublishRequest_Topic:
		o, ok := b.GetDestination().(*sluicev1.PublishRequest_Topic)
		return ok && o.Topic == d.Topic
	case *sluicev1.PublishRequest_Queue:
		o, ok := b.GetDestination().(*sluicev1.PublishRequest_Queue)
		return ok && o.Queue == d.Queue
	}
	return false
}

func failAll(resp *sluicev1.PublishResponse, e *sluicev1.PublishError) {
	for i := range resp.Results {
		if resp.Results[i] == nil {
			resp.Results[i] = &sluicev1.PublishResult{Error: e}
		}
	}
	for _, b := range resp.BatchResults {
		if b.Error == nil {
			b.Error = e
		}
	}
}

// publishError is err as a unary call would have failed with it.
func publishError(a *API, err error) *sluicev1.PublishError {
	var meta map[string]string
	var me metaError
	if errors.As(err, &me) {
		meta = me.meta
	}
	var cerr *connect.Error
	if !errors.As(a.toConnect(err, meta), &cerr) {
		return &sluicev1.PublishError{Code: connect.CodeInternal.String(), Message: "internal error"}
	}
	out := &sluicev1.PublishError{Code: cerr.Code().String(), Message: cerr.Message()}
	for _, d := range cerr.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*sluicev1.ErrorInfo); ok {
				out.Info = info
			}
		}
	}
	return out
}

// byteWindow bounds the bytes a stream holds unanswered.
type byteWindow struct {
	mu    sync.Mutex
	limit int64
	used  int64
	freed chan struct{} // closed and replaced whenever bytes are released
}

func newByteWindow(limit int64) *byteWindow {
	return &byteWindow{limit: limit, freed: make(chan struct{})}
}

// acquire waits until n more bytes fit (or nothing is held: one request
// larger than the window still passes alone); false if ctx ended first.
func (w *byteWindow) acquire(ctx context.Context, n int64) bool {
	for {
		w.mu.Lock()
		if w.used == 0 || w.used+n <= w.limit {
			w.used += n
			w.mu.Unlock()
			return true
		}
		freed := w.freed
		w.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

func (w *byteWindow) release(n int64) {
	w.mu.Lock()
	w.used -= n
	close(w.freed)
	w.freed = make(chan struct{})
	w.mu.Unlock()
}

// held is the bytes held now (tests).
func (w *byteWindow) held() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.used
}
