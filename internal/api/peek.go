package api

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Peek and PreviewRedrive: reading a queue without receiving from it.

var peekStates = map[string]sluicev1.MessageState{
	"visible":   sluicev1.MessageState_MESSAGE_STATE_VISIBLE,
	"in_flight": sluicev1.MessageState_MESSAGE_STATE_IN_FLIGHT,
	"delayed":   sluicev1.MessageState_MESSAGE_STATE_DELAYED,
	"blocked":   sluicev1.MessageState_MESSAGE_STATE_BLOCKED,
}

func peekedToProto(pm broker.PeekedMessage) *sluicev1.PeekedMessage {
	m := messageToProto(*pm.Message, pm.Offset)
	m.ReceiveCount, m.VisibilityDeadline = int32(pm.ReceiveCount), ts(pm.VisibleAt)
	return &sluicev1.PeekedMessage{Message: m, State: peekStates[pm.State]}
}

func (q *queueService) Peek(_ context.Context, req *connect.Request[sluicev1.PeekRequest]) (*connect.Response[sluicev1.PeekResponse], error) {
	m := req.Msg
	name := m.GetQueue()
	if n := m.GetMaxMessages(); n < 0 || n > broker.PeekMax {
		return nil, invalidArg(ReasonInvalidArgument, "max_messages", fmt.Sprintf("max_messages %d: want 1 to %d", n, broker.PeekMax), qmeta(name))
	}
	if _, _, ok := splitSub(name); ok {
		return nil, invalidArg(ReasonInvalidArgument, "queue",
			name+" is a subscription: read its topic by offset with TopicService.Fetch", qmeta(name))
	}
	if m.GetFromSequence() > 1<<62 {
		return nil, invalidArg(ReasonInvalidArgument, "from_sequence", "from_sequence is past any log", qmeta(name))
	}
	res, err := q.b.PeekQueue(name, broker.PeekOptions{From: int64(m.GetFromSequence()), Max: int(m.GetMaxMessages())})
	if err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	out := &sluicev1.PeekResponse{NextSequence: uint64(res.Next), EndSequence: uint64(res.End),
		Messages: make([]*sluicev1.PeekedMessage, len(res.Messages))}
	for i, pm := range res.Messages {
		out.Messages[i] = peekedToProto(pm)
	}
	return connect.NewResponse(out), nil
}

func (d *deadLetterService) PreviewRedrive(_ context.Context, req *connect.Request[sluicev1.PreviewRedriveRequest]) (*connect.Response[sluicev1.PreviewRedriveResponse], error) {
	m := req.Msg
	name := m.GetDeadLetterQueue()
	meta := qmeta(name)
	sample := int32(10)
	if m.SampleSize != nil {
		sample = m.GetSampleSize()
	}
	if sample < 0 || sample > broker.PeekMax {
		return nil, invalidArg(ReasonInvalidArgument, "sample_size", fmt.Sprintf("sample_size %d: want 0 to %d", sample, broker.PeekMax), meta)
	}
	if m.GetLimit() < 0 {
		return nil, invalidArg(ReasonInvalidArgument, "limit", "limit must not be negative", meta)
	}
	p, err := d.b.PreviewRedrive(broker.RedriveRequest{Source: name, Destination: m.GetDestinationQueue(),
		Limit: m.GetLimit(), Match: redriveMatch(m.GetFilter())}, int(sample))
	if err != nil {
		if _, qerr := d.b.GetQueue(name); qerr == nil && m.GetDestinationQueue() != "" {
			meta["queue"] = m.GetDestinationQueue()
		}
		return nil, d.toConnect(err, meta)
	}
	out := &sluicev1.PreviewRedriveResponse{Count: p.Count, Examined: p.Examined, Complete: p.Complete,
		Unroutable: p.Unroutable, Waiting: p.Waiting}
	for _, dc := range p.Destinations {
		out.Destinations = append(out.Destinations, &sluicev1.RedriveDestinationCount{Queue: dc.Queue, Count: dc.Count})
	}
	for _, pm := range p.Sample {
		out.Sample = append(out.Sample, peekedToProto(pm))
	}
	return connect.NewResponse(out), nil
}
