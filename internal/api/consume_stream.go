package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/auth"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// StreamService.Consume: QueueService.Consume's deliveries, with acks read
// from the same stream. The delivery side is consumeLoop, as for the server
// stream; a second goroutine reads ack requests, acks each request's
// receipts with one durable write and answers them (in order). It frees
// their lease slots as soon as the acks are applied (ackStaged), which
// wakes the delivery side at once: its next receive joins the acks'
// journal write.
func (s *streamService) Consume(ctx context.Context, stream *connect.BidiStream[sluicev1.StreamServiceConsumeRequest, sluicev1.StreamServiceConsumeResponse]) error {
	first, err := stream.Receive()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil || len(first.GetAcks()) > 0 {
		return invalidArg(ReasonInvalidArgument, "start", "the first request names the queue (start) and acks nothing", nil)
	}
	name := start.GetQueue()
	if s.auth.Enabled() {
		if err := s.allowed(ctx, auth.Consume, queueRes(name)); err != nil {
			return err
		}
	}
	limit, vis, err := s.consumeParams(start)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex // one Send at a time; none after the handler returns
	done := false
	send := func(r *sluicev1.StreamServiceConsumeResponse) error {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return context.Canceled
		}
		return stream.Send(r)
	}
	defer func() { mu.Lock(); done = true; mu.Unlock() }()
	// The ack reader ends when the client closes its side or goes away
	// (Receive fails), and then ends the stream: it is not waited for, as
	// a blocked Receive only returns once the body does.
	go func() {
		defer cancel()
		for {
			req, err := stream.Receive()
			if err != nil {
				return
			}
			resp, err := s.streamAcks(ctx, name, req)
			if err != nil {
				return
			}
			if send(resp) != nil {
				return
			}
		}
	}()
	// A receive's deliveries go out corked (cork.go): one flush for the
	// run, not one per message. The ack answers wait for the run.
	cork := corkOf(ctx)
	return s.consumeLoop(ctx, name, limit, vis, stream.RequestHeader(), func(ms []*sluicev1.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return context.Canceled
		}
		cork.cork()
		defer cork.uncork()
		for _, m := range ms {
			if err := stream.Send(&sluicev1.StreamServiceConsumeResponse{Message: m}); err != nil {
				return err
			}
		}
		return nil
	})
}

// streamAcks acks one request's receipts; a refusal of the request (a
// second start, too many receipts) is each receipt's error, so the answer
// still pairs with the request. The error ends the stream (ctx ended).
func (s *streamService) streamAcks(ctx context.Context, name string, req *sluicev1.StreamServiceConsumeRequest) (*sluicev1.StreamServiceConsumeResponse, error) {
	receipts := req.GetAcks()
	var refuse error
	switch {
	case req.GetStart() != nil:
		refuse = invalidArg(ReasonInvalidArgument, "start", "start is for the first request only", qmeta(name))
	case len(receipts) > maxAckBatch:
		refuse = invalidArg(ReasonInvalidArgument, "acks", fmt.Sprintf("%d receipts: want at most %d", len(receipts), maxAckBatch), qmeta(name))
	}
	out := &sluicev1.StreamServiceConsumeResponse{}
	if refuse == nil && len(receipts) > 0 {
		res, err := s.ackStaged(ctx, name, receipts)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			out.Acks = res
			return out, nil
		}
		refuse = err
	}
	if refuse != nil {
		info := errorInfo(refuse, qmeta(name))
		var cerr *connect.Error
		if errors.As(refuse, &cerr) {
			if pe := publishError(s.API, refuse); pe.GetInfo() != nil {
				info = pe.GetInfo()
			}
		}
		for _, r := range receipts {
			out.Acks = append(out.Acks, &sluicev1.AckResult{Receipt: r, Error: info})
		}
	}
	return out, nil
}
