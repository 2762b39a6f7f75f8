package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Limits of the message calls, from queue.proto.
const (
	maxSendBatch    = 100
	maxReceiveBatch = 100
	maxAckBatch     = 100
	maxReceiveWait  = 20 * time.Second
	// consumeWait is how long one receive of a Consume stream waits before
	// looping; it only bounds how stale a drain check can be.
	consumeWait          = 20 * time.Second
	defaultConsumeFlight = 10
)

func (q *queueService) Send(ctx context.Context, req *connect.Request[sluicev1.SendRequest]) (*connect.Response[sluicev1.SendResponse], error) {
	if req.Msg.GetMessage() == nil {
		return nil, invalidArg(ReasonInvalidArgument, "message", "message is required", qmeta(req.Msg.GetQueue()))
	}
	res, err := q.send(ctx, req.Msg.GetQueue(), []*sluicev1.SendEntry{req.Msg.GetMessage()})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.SendResponse{Result: res[0]}), nil
}

func (q *queueService) SendBatch(ctx context.Context, req *connect.Request[sluicev1.SendBatchRequest]) (*connect.Response[sluicev1.SendBatchResponse], error) {
	n := len(req.Msg.GetMessages())
	if n == 0 || n > maxSendBatch {
		return nil, invalidArg(ReasonInvalidArgument, "messages", fmt.Sprintf("%d messages: want 1 to %d", n, maxSendBatch), qmeta(req.Msg.GetQueue()))
	}
	res, err := q.send(ctx, req.Msg.GetQueue(), req.Msg.GetMessages())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.SendBatchResponse{Results: res}), nil
}

// send checks every entry against the queue's settings first, so that an
// invalid entry refuses the whole batch before anything is stored (the
// broker's Send refuses entries one by one), then stores them together.
func (a *API) send(ctx context.Context, name string, entries []*sluicev1.SendEntry) ([]*sluicev1.SendResult, error) {
	s, err := a.b.GetQueue(name)
	if err != nil {
		return nil, a.toConnect(err, qmeta(name))
	}
	ins := make([]broker.SendInput, len(entries))
	for i, e := range entries {
		meta := qmeta(name)
		if len(entries) > 1 {
			meta["index"] = strconv.Itoa(i)
		}
		if ins[i], err = sendInput(e); err != nil {
			return nil, err
		}
		a.traceSend(ctx, &ins[i])
		if err := precheck(s, ins[i], meta); err != nil {
			return nil, err
		}
	}
	res, err := a.b.Send(ctx, name, ins)
	if err != nil {
		return nil, a.toConnect(err, qmeta(name))
	}
	out := make([]*sluicev1.SendResult, len(res))
	for i, r := range res {
		if r.Err != nil {
			// Only a settings change racing this call gets here.
			return nil, a.toConnect(r.Err, map[string]string{"queue": name, "index": strconv.Itoa(i)})
		}
		out[i] = sendResultToProto(r)
	}
	return out, nil
}

// precheck gives the refusals that have their own reason in common.proto
// (the broker reports them all as invalid arguments).
func precheck(s broker.QueueSettings, in broker.SendInput, meta map[string]string) error {
	size := len(in.Body)
	for k, v := range in.Attributes {
		size += len(k) + len(v.DataType) + len(v.Value)
	}
	switch {
	case size > s.MaxMessageBytes:
		meta["limit"] = strconv.Itoa(s.MaxMessageBytes)
		return apiError(connect.CodeInvalidArgument, ReasonMessageTooLarge,
			fmt.Errorf("message is %d bytes, over the queue's limit of %d", size, s.MaxMessageBytes), meta)
	case s.FIFO && in.GroupID == "":
		return invalidArg(ReasonGroupIDRequired, "group_id", "a FIFO queue needs a group_id", meta)
	case !s.FIFO && in.GroupID != "":
		return invalidArg(ReasonGroupIDNotAllowed, "group_id", "group_id is for FIFO queues only", meta)
	case in.Delay < 0:
		return invalidArg(ReasonInvalidArgument, "delay", "delay must not be negative", meta)
	case in.Delay > s.Retention:
		return invalidArg(ReasonDelayTooLong, "delay", fmt.Sprintf("delay %v is beyond the queue's retention %v", in.Delay, s.Retention), meta)
	}
	return nil
}

func (q *queueService) Receive(ctx context.Context, req *connect.Request[sluicev1.ReceiveRequest]) (*connect.Response[sluicev1.ReceiveResponse], error) {
	m := req.Msg
	name := m.GetQueue()
	if n := m.GetMaxMessages(); n < 0 || n > maxReceiveBatch {
		return nil, invalidArg(ReasonInvalidArgument, "max_messages", fmt.Sprintf("max_messages %d: want 1 to %d", n, maxReceiveBatch), qmeta(name))
	}
	opts := broker.ReceiveOptions{Max: int(m.GetMaxMessages()), Wait: broker.WaitQueueDefault}
	var err error
	if opts.Visibility, err = fromDur(m.GetVisibilityTimeout(), "visibility_timeout"); err != nil {
		return nil, err
	}
	if m.GetWait() != nil {
		if opts.Wait, err = fromDur(m.GetWait(), "wait"); err != nil {
			return nil, err
		}
		if opts.Wait < 0 || opts.Wait > maxReceiveWait {
			return nil, invalidArg(ReasonInvalidArgument, "wait", fmt.Sprintf("wait %v: want 0 to %v", opts.Wait, maxReceiveWait), qmeta(name))
		}
	}
	pollCtx, cancel := q.untilDrain(ctx)
	defer cancel()
	msgs, err := q.receive(pollCtx, name, opts)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		err = nil // the server began draining: an empty answer, as after the wait
	}
	if err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	return connect.NewResponse(&sluicev1.ReceiveResponse{Messages: msgs}), nil
}

func (q *queueService) Ack(ctx context.Context, req *connect.Request[sluicev1.AckRequest]) (*connect.Response[sluicev1.AckResponse], error) {
	name, receipt := req.Msg.GetQueue(), req.Msg.GetReceipt()
	if err := q.ack(ctx, name, receipt); err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	q.streams.release(name, receipt)
	return connect.NewResponse(&sluicev1.AckResponse{}), nil
}

func (q *queueService) AckBatch(ctx context.Context, req *connect.Request[sluicev1.AckBatchRequest]) (*connect.Response[sluicev1.AckBatchResponse], error) {
	name, receipts := req.Msg.GetQueue(), req.Msg.GetReceipts()
	if len(receipts) == 0 || len(receipts) > maxAckBatch {
		return nil, invalidArg(ReasonInvalidArgument, "receipts", fmt.Sprintf("%d receipts: want 1 to %d", len(receipts), maxAckBatch), qmeta(name))
	}
	res, err := q.ackBatch(ctx, name, receipts)
	if err != nil {
		return nil, q.toConnect(err, qmeta(name)) // the whole call failed, not one receipt
	}
	return connect.NewResponse(&sluicev1.AckBatchResponse{Results: res}), nil
}

// ackBatch acks receipts of name together (one durable write), releasing
// the stream leases of those acked; the error is the whole call's.
func (a *API) ackBatch(ctx context.Context, name string, receipts []string) ([]*sluicev1.AckResult, error) {
	var errs []error
	var err error
	if topic, sub, ok := splitSub(name); ok {
		errs, err = a.b.SubscriptionAckBatch(ctx, topic, sub, receipts)
	} else {
		errs, err = a.b.AckBatch(ctx, name, receipts)
	}
	if err != nil {
		return nil, err
	}
	return ackResults(name, receipts, errs, func(r string) { a.streams.release(name, r) }), nil
}

// ackResults is each receipt's answer, with done called for every receipt acked.
func ackResults(name string, receipts []string, errs []error, done func(receipt string)) []*sluicev1.AckResult {
	out := make([]*sluicev1.AckResult, len(receipts))
	for i, r := range receipts {
		out[i] = &sluicev1.AckResult{Receipt: r}
		if errs[i] != nil {
			out[i].Error = errorInfo(errs[i], qmeta(name))
			continue
		}
		done(r)
	}
	return out
}

// ackStaged acks receipts as ackBatch does, but frees their leases once
// the acks are applied, before they are durable, so the Consume stream
// holding them receives its next deliveries at once and that receive
// shares the acks' journal write instead of waiting for it: one fdatasync
// per consume cycle instead of two in series. Nothing is answered early:
// the acks are reported once durable, and the receive behind them is
// durable only if they are (Broker.AckBatchStaged). If the write fails the
// leases are given back. Subscriptions take ackBatch's path.
func (a *API) ackStaged(ctx context.Context, name string, receipts []string) ([]*sluicev1.AckResult, error) {
	if _, _, ok := splitSub(name); ok {
		return a.ackBatch(ctx, name, receipts)
	}
	errs, durable, err := a.b.AckBatchStaged(ctx, name, receipts)
	if err != nil {
		return nil, err
	}
	var taken []heldLease
	for i, r := range receipts {
		if errs[i] == nil {
			a.streams.take(name, r, &taken)
		}
	}
	if err := durable(); err != nil {
		a.streams.restore(taken)
		return nil, err
	}
	return ackResults(name, receipts, errs, func(string) {}), nil
}

func (q *queueService) Extend(ctx context.Context, req *connect.Request[sluicev1.ExtendRequest]) (*connect.Response[sluicev1.ExtendResponse], error) {
	name, receipt := req.Msg.GetQueue(), req.Msg.GetReceipt()
	if req.Msg.GetVisibilityTimeout() == nil {
		return nil, invalidArg(ReasonInvalidArgument, "visibility_timeout", "visibility_timeout is required", qmeta(name))
	}
	d, err := fromDur(req.Msg.GetVisibilityTimeout(), "visibility_timeout")
	if err != nil {
		return nil, err
	}
	if err := q.extend(ctx, name, receipt, d); err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	// The broker sets the deadline to its now+d; this clock reads the same
	// time source, a moment later.
	deadline := time.Now().Add(d)
	q.streams.extend(name, receipt, deadline)
	return connect.NewResponse(&sluicev1.ExtendResponse{VisibilityDeadline: ts(deadline)}), nil
}

func (q *queueService) Nack(ctx context.Context, req *connect.Request[sluicev1.NackRequest]) (*connect.Response[sluicev1.NackResponse], error) {
	name, receipt := req.Msg.GetQueue(), req.Msg.GetReceipt()
	delay, err := fromDur(req.Msg.GetDelay(), "delay")
	if err != nil {
		return nil, err
	}
	if err := q.nack(ctx, name, receipt, delay, req.Msg.GetReason()); err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	q.streams.release(name, receipt)
	return connect.NewResponse(&sluicev1.NackResponse{}), nil
}
