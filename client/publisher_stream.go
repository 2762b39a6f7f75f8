package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// pubStream is one Publish stream: a goroutine writes requests in the order
// they were handed over, another reads the answers, which come in the same
// order, and resolves the oldest request's futures with each. fifo holds the
// requests handed over and not answered; when the stream fails, all of them
// fail with its error.
type pubStream struct {
	s        publishStream
	cancel   context.CancelFunc
	answered func(batch []*PublishFuture, byServer bool)
	// prepare rewrites each request just before it is written, on the
	// writer's goroutine (nil: none): work kept off the Publisher's lock.
	prepare func(*sluicev1.PublishRequest) *sluicev1.PublishRequest

	mu         sync.Mutex
	fifo       [][]*PublishFuture
	sendc      chan *sluicev1.PublishRequest // at most MaxInFlight queued: never full
	sendClosed bool
	dead       error
	done       chan struct{} // closed when the reader ends
}

func startPubStream(open func(context.Context) publishStream, depth int,
	prepare func(*sluicev1.PublishRequest) *sluicev1.PublishRequest, answered func([]*PublishFuture, bool)) *pubStream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &pubStream{s: open(ctx), cancel: cancel, answered: answered, prepare: prepare,
		sendc: make(chan *sluicev1.PublishRequest, depth), done: make(chan struct{})}
	go s.sendLoop()
	go s.recvLoop()
	return s
}

// send hands req (batch's entries) to the writer. It never blocks: it is
// called under the Publisher's lock, which the answers need too.
func (s *pubStream) send(req *sluicev1.PublishRequest, batch []*PublishFuture) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead != nil || s.sendClosed {
		err := s.dead
		if err == nil {
			err = errPublisherClosed
		}
		go s.fail(batch, err)
		return
	}
	s.fifo = append(s.fifo, batch)
	s.sendc <- req
}

func (s *pubStream) sendLoop() {
	for req := range s.sendc {
		if s.isDead() {
			continue // its batch was failed with the stream
		}
		if s.prepare != nil {
			req = s.prepare(req)
		}
		if err := s.s.Send(req); err != nil {
			// The reader sees why (Send says only io.EOF); stop writing.
			s.kill(fmt.Errorf("sluice: publish stream: %w", err))
		}
	}
	if !s.isDead() {
		_ = s.s.CloseRequest() // every request is written: the server answers them and ends
	}
}

func (s *pubStream) recvLoop() {
	defer close(s.done)
	for {
		resp, err := s.s.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("sluice: publish stream ended before answering")
			}
			s.kill(wrap(err))
			return
		}
		s.mu.Lock()
		if len(s.fifo) == 0 {
			s.mu.Unlock()
			s.kill(errors.New("sluice: publish stream: an answer to no request"))
			return
		}
		batch := s.fifo[0]
		s.fifo = s.fifo[1:]
		s.mu.Unlock()
		resolveBatch(batch, resp)
		s.answered(batch, true)
	}
}

// kill fails the stream: every request not answered fails with err.
func (s *pubStream) kill(err error) {
	s.mu.Lock()
	if s.dead != nil {
		s.mu.Unlock()
		return
	}
	s.dead = err
	lost := s.fifo
	s.fifo = nil
	if !s.sendClosed {
		s.sendClosed = true
		close(s.sendc)
	}
	s.mu.Unlock()
	s.cancel()
	for _, b := range lost {
		s.fail(b, err)
	}
}

func (s *pubStream) fail(batch []*PublishFuture, err error) {
	for _, f := range batch {
		f.resolve(nil, err)
	}
	s.answered(batch, false)
}

func (s *pubStream) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead != nil
}

// unanswered is every future handed over and not answered yet.
func (s *pubStream) unanswered() []*PublishFuture {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*PublishFuture
	for _, b := range s.fifo {
		out = append(out, b...)
	}
	return out
}

// close ends the stream after what was handed over is written; the server
// answers it and ends its side, and the reader with it.
func (s *pubStream) close() {
	s.mu.Lock()
	if !s.sendClosed {
		s.sendClosed = true
		close(s.sendc)
	}
	s.mu.Unlock()
	<-s.done
	_ = s.s.CloseResponse()
	s.cancel()
}

// resolveBatch answers batch's futures from resp, entry by entry.
func resolveBatch(batch []*PublishFuture, resp *sluicev1.PublishResponse) {
	if resp.GetError() == nil && len(resp.GetBatchResults()) > 0 {
		resolveRecordBatches(batch, resp.GetBatchResults())
		return
	}
	var whole error
	switch {
	case resp.GetError() != nil:
		whole = publishErr(resp.GetError())
	case len(resp.GetResults()) != len(batch):
		whole = fmt.Errorf("sluice: publish: %d results for %d entries", len(resp.GetResults()), len(batch))
	}
	for i, f := range batch {
		switch {
		case whole != nil:
			f.resolve(nil, whole)
		case resp.GetResults()[i].GetError() != nil:
			f.resolve(nil, publishErr(resp.GetResults()[i].GetError()))
		default:
			f.resolve(resp.GetResults()[i], nil)
		}
	}
}

// publishErr is an entry's refusal as the *Error a unary call would give.
func publishErr(e *sluicev1.PublishError) error {
	var code connect.Code
	if err := code.UnmarshalText([]byte(e.GetCode())); err != nil {
		code = connect.CodeUnknown
	}
	out := &Error{Code: code, Message: e.GetMessage(), Reason: e.GetInfo().GetReason(), Metadata: e.GetInfo().GetMetadata()}
	if out.Reason == "" {
		out.Reason = reasonForCode(code)
	}
	return out
}

// resolveRecordBatches answers the futures of a request sent as record
// batches (PublisherOptions.RecordBatches): each BatchResult answers the
// next Records futures, record i at its base offset + i.
func resolveRecordBatches(batch []*PublishFuture, results []*sluicev1.BatchResult) {
	n := 0
	for _, r := range results {
		n += int(r.GetRecords())
	}
	if n != len(batch) {
		err := fmt.Errorf("sluice: publish: %d records answered for %d entries", n, len(batch))
		for _, f := range batch {
			f.resolve(nil, err)
		}
		return
	}
	at := 0
	for _, r := range results {
		var err error
		if r.GetError() != nil {
			err = publishErr(r.GetError())
		}
		for i := range int(r.GetRecords()) {
			if err != nil {
				batch[at].resolve(nil, err)
			} else {
				batch[at].resolve(&PublishResult{Record: &sluicev1.ProduceResult{
					Partition: r.GetPartition(), Offset: r.GetBaseOffset() + int64(i)}}, nil)
			}
			at++
		}
	}
}
