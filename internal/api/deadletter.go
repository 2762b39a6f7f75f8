package api

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// deadLetterService implements sluice.v1.DeadLetterService.
type deadLetterService struct{ *API }

var _ sluicev1connect.DeadLetterServiceHandler = (*deadLetterService)(nil)

var redriveStates = map[string]sluicev1.RedriveState{
	broker.RedriveRunning:    sluicev1.RedriveState_REDRIVE_STATE_RUNNING,
	broker.RedriveCancelling: sluicev1.RedriveState_REDRIVE_STATE_RUNNING, // still moving its last message
	broker.RedriveCompleted:  sluicev1.RedriveState_REDRIVE_STATE_COMPLETED,
	broker.RedriveCancelled:  sluicev1.RedriveState_REDRIVE_STATE_CANCELLED,
	broker.RedriveFailed:     sluicev1.RedriveState_REDRIVE_STATE_FAILED,
}

// redriveToProto converts a task. The broker's task does not keep the
// filter and limit it was started with, so only StartRedrive's answer (which
// has the request at hand) carries them.
func redriveToProto(t broker.RedriveTask, f *sluicev1.RedriveFilter, limit int64) *sluicev1.Redrive {
	out := &sluicev1.Redrive{
		Id: t.ID, DeadLetterQueue: t.Source, DestinationQueue: t.Destination, Filter: f,
		MaxPerSecond: int32(t.RatePerSecond), Limit: limit, State: redriveStates[t.Status],
		Moved: t.Moved, ToMove: t.ToMove, StartTime: ts(t.StartedAt), EndTime: ts(t.FinishedAt),
	}
	if t.Failure != "" {
		out.Error = &sluicev1.ErrorInfo{Reason: ReasonInternal, Metadata: map[string]string{"message": t.Failure}}
	}
	return out
}

func (d *deadLetterService) ListDeadLetterSources(ctx context.Context, req *connect.Request[sluicev1.ListDeadLetterSourcesRequest]) (*connect.Response[sluicev1.ListDeadLetterSourcesResponse], error) {
	name := req.Msg.GetQueue()
	if _, err := d.b.GetQueue(name); err != nil {
		return nil, d.toConnect(err, qmeta(name))
	}
	sources := slices.DeleteFunc(d.b.DeadLetterSources(name), func(n string) bool { return !d.visible(ctx, queueRes(n)) })
	return connect.NewResponse(&sluicev1.ListDeadLetterSourcesResponse{SourceQueues: sources}), nil
}

// redriveMatch turns the request's filter into the broker's, which is saved
// with the task so that a redrive resumed after a restart keeps its filter.
func redriveMatch(f *sluicev1.RedriveFilter) *broker.RedriveMatch {
	if f.GetSourceQueue() == "" && len(f.GetAttributes()) == 0 {
		return nil
	}
	m := &broker.RedriveMatch{SourceQueue: f.GetSourceQueue()}
	if len(f.GetAttributes()) > 0 {
		m.Attributes = make(map[string]broker.Attribute, len(f.GetAttributes()))
		for k, a := range f.GetAttributes() {
			m.Attributes[k] = broker.Attribute{DataType: a.GetType(), Value: a.GetValue()}
		}
	}
	return m
}

func (d *deadLetterService) StartRedrive(_ context.Context, req *connect.Request[sluicev1.StartRedriveRequest]) (*connect.Response[sluicev1.StartRedriveResponse], error) {
	m := req.Msg
	name := m.GetDeadLetterQueue()
	meta := qmeta(name)
	if m.GetMaxPerSecond() < 0 || m.GetLimit() < 0 {
		return nil, invalidArg(ReasonInvalidArgument, "max_per_second", "max_per_second and limit must not be negative", meta)
	}
	if _, err := d.b.GetQueue(name); err != nil {
		return nil, d.toConnect(err, meta)
	}
	// Without a destination each message returns to its source, which only
	// a dead-letter queue records.
	if m.GetDestinationQueue() == "" && len(d.b.DeadLetterSources(name)) == 0 {
		return nil, apiError(connect.CodeFailedPrecondition, ReasonNotDeadLetter,
			fmt.Errorf("%s is not a dead-letter queue of any queue; name a destination_queue", name), meta)
	}
	t, err := d.b.StartRedrive(broker.RedriveRequest{
		Source: name, Destination: m.GetDestinationQueue(), RatePerSecond: int(m.GetMaxPerSecond()),
		Limit: m.GetLimit(), Match: redriveMatch(m.GetFilter()),
	})
	if err != nil {
		if errors.Is(err, broker.ErrQueueNotFound) && m.GetDestinationQueue() != "" {
			meta["queue"] = m.GetDestinationQueue()
		}
		return nil, d.toConnect(err, meta)
	}
	return connect.NewResponse(&sluicev1.StartRedriveResponse{Redrive: redriveToProto(t, m.GetFilter(), m.GetLimit())}), nil
}

func (d *deadLetterService) GetRedrive(ctx context.Context, req *connect.Request[sluicev1.GetRedriveRequest]) (*connect.Response[sluicev1.GetRedriveResponse], error) {
	t, err := d.b.GetRedrive(req.Msg.GetId())
	if err != nil {
		return nil, d.toConnect(err, map[string]string{"redrive_id": req.Msg.GetId()})
	}
	if err := d.allowed(ctx, auth.Describe, queueRes(t.Source)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.GetRedriveResponse{Redrive: redriveToProto(t, nil, 0)}), nil
}

func (d *deadLetterService) ListRedrives(ctx context.Context, req *connect.Request[sluicev1.ListRedrivesRequest]) (*connect.Response[sluicev1.ListRedrivesResponse], error) {
	out := &sluicev1.ListRedrivesResponse{}
	for _, t := range d.b.ListRedrives(req.Msg.GetDeadLetterQueue()) {
		if !d.visible(ctx, queueRes(t.Source)) {
			continue
		}
		out.Redrives = append(out.Redrives, redriveToProto(t, nil, 0))
	}
	if d.fanOut(ctx) {
		out.Redrives = d.redrivesEverywhere(ctx, req.Header(), req.Msg, out.Redrives)
	}
	return connect.NewResponse(out), nil
}

func (d *deadLetterService) CancelRedrive(ctx context.Context, req *connect.Request[sluicev1.CancelRedriveRequest]) (*connect.Response[sluicev1.CancelRedriveResponse], error) {
	// The redrive's queue is known only from the broker: a read first, the
	// check, then the cancel.
	t, err := d.b.GetRedrive(req.Msg.GetId())
	if err != nil {
		return nil, d.toConnect(err, map[string]string{"redrive_id": req.Msg.GetId()})
	}
	if err := d.allowed(ctx, auth.Redrive, queueRes(t.Source)); err != nil {
		return nil, err
	}
	t, err = d.b.CancelRedrive(req.Msg.GetId())
	if err != nil {
		return nil, d.toConnect(err, map[string]string{"redrive_id": req.Msg.GetId()})
	}
	return connect.NewResponse(&sluicev1.CancelRedriveResponse{Redrive: redriveToProto(t, nil, 0)}), nil
}
