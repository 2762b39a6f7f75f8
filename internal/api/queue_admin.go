package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// queueService implements sluice.v1.QueueService: admin calls here, message
// calls in queue_msgs.go.
type queueService struct{ *API }

var _ sluicev1connect.QueueServiceHandler = (*queueService)(nil)

func qmeta(name string) map[string]string { return map[string]string{"queue": name} }

// queueProto assembles a Queue: settings, stats and dead-letter sources.
func (a *API) queueProto(s broker.QueueSettings) (*sluicev1.Queue, error) {
	st, err := a.b.QueueStats(s.Name)
	if err != nil {
		return nil, err
	}
	return &sluicev1.Queue{
		Name: s.Name, Config: settingsToConfig(s), Stats: statsToProto(st),
		CreateTime: ts(s.CreatedAt),
		// Subscriptions that dead-letter here count too, as "<topic>/<name>".
		DeadLetterSources: append(a.b.DeadLetterSources(s.Name), a.b.SubscriptionsDeadLetteringTo(s.Name)...),
	}, nil
}

func (a *API) describeQueue(name string) (*sluicev1.Queue, error) {
	if topic, sub, ok := splitSub(name); ok {
		return a.subscriptionAsQueue(topic, sub)
	}
	s, err := a.b.GetQueue(name)
	if err != nil {
		return nil, a.toConnect(err, qmeta(name))
	}
	q, err := a.queueProto(s)
	return q, a.toConnect(err, qmeta(name))
}

func (q *queueService) CreateQueue(_ context.Context, req *connect.Request[sluicev1.CreateQueueRequest]) (*connect.Response[sluicev1.CreateQueueResponse], error) {
	name := req.Msg.GetName()
	s, err := queueConfigToSettings(name, req.Msg.GetConfig())
	if err != nil {
		return nil, err
	}
	if s, err = q.b.CreateQueue(s); err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	out, err := q.queueProto(s)
	if err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	return connect.NewResponse(&sluicev1.CreateQueueResponse{Queue: out}), nil
}

func (q *queueService) GetQueue(_ context.Context, req *connect.Request[sluicev1.GetQueueRequest]) (*connect.Response[sluicev1.GetQueueResponse], error) {
	out, err := q.describeQueue(req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.GetQueueResponse{Queue: out}), nil
}

const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// page picks names[start:start+size] after the page token (the last name
// of the previous page, so pages stay stable while queues come and go).
func page(names []string, size int32, token string) ([]string, string, error) {
	switch {
	case size < 0 || size > maxPageSize:
		return nil, "", invalidArg(ReasonInvalidArgument, "page_size", fmt.Sprintf("page_size %d: want 0 to %d", size, maxPageSize), nil)
	case size == 0:
		size = defaultPageSize
	}
	start := 0
	if token != "" {
		for start < len(names) && names[start] <= token {
			start++
		}
	}
	end := min(len(names), start+int(size))
	next := ""
	if end < len(names) {
		next = names[end-1]
	}
	return names[start:end], next, nil
}

func (q *queueService) ListQueues(ctx context.Context, req *connect.Request[sluicev1.ListQueuesRequest]) (*connect.Response[sluicev1.ListQueuesResponse], error) {
	// Filtered before paging, so a page is full of what the caller may see.
	all := slices.DeleteFunc(q.b.ListQueues(req.Msg.GetPrefix()), func(n string) bool { return !q.visible(ctx, queueRes(n)) })
	names, next, err := page(all, req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	queues, err := q.describeAll(ctx, req.Header(), names) // queue_list_fanout.go
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.ListQueuesResponse{NextPageToken: next, Queues: queues}), nil
}

// updatableFields are the QueueConfig fields UpdateQueue may name, with how
// each is copied into the settings.
var updatableFields = map[string]func(dst *broker.QueueSettings, src broker.QueueSettings){
	"visibility_timeout":          func(d *broker.QueueSettings, s broker.QueueSettings) { d.VisibilityTimeout = s.VisibilityTimeout },
	"retention":                   func(d *broker.QueueSettings, s broker.QueueSettings) { d.Retention = s.Retention },
	"delay":                       func(d *broker.QueueSettings, s broker.QueueSettings) { d.DefaultDelay = s.DefaultDelay },
	"receive_wait":                func(d *broker.QueueSettings, s broker.QueueSettings) { d.ReceiveWait = s.ReceiveWait },
	"max_message_bytes":           func(d *broker.QueueSettings, s broker.QueueSettings) { d.MaxMessageBytes = s.MaxMessageBytes },
	"content_based_deduplication": func(d *broker.QueueSettings, s broker.QueueSettings) { d.ContentBasedDedup = s.ContentBasedDedup },
	"deduplication_window":        func(d *broker.QueueSettings, s broker.QueueSettings) { d.DedupWindow = s.DedupWindow },
	"max_visibility_extension":    func(d *broker.QueueSettings, s broker.QueueSettings) { d.MaxExtension = s.MaxExtension },
	"dead_letter": func(d *broker.QueueSettings, s broker.QueueSettings) {
		d.DeadLetterQueue, d.MaxReceives = s.DeadLetterQueue, s.MaxReceives
	},
}

func (q *queueService) UpdateQueue(_ context.Context, req *connect.Request[sluicev1.UpdateQueueRequest]) (*connect.Response[sluicev1.UpdateQueueResponse], error) {
	name := req.Msg.GetName()
	paths := req.Msg.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, invalidArg(ReasonInvalidArgument, "update_mask", "update_mask is required: name the config fields to change", qmeta(name))
	}
	var apply []func(*broker.QueueSettings, broker.QueueSettings)
	for _, p := range paths {
		p = strings.TrimPrefix(p, "config.")
		fn, ok := updatableFields[p]
		if !ok {
			return nil, invalidArg(ReasonInvalidArgument, "update_mask", fmt.Sprintf("update_mask: %q is not a field that can change", p), qmeta(name))
		}
		apply = append(apply, fn)
	}
	src, err := queueConfigToSettings(name, req.Msg.GetConfig())
	if err != nil {
		return nil, err
	}
	s, err := q.b.UpdateQueue(name, func(dst *broker.QueueSettings) {
		for _, fn := range apply {
			fn(dst, src)
		}
	})
	if err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	out, err := q.queueProto(s)
	if err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	return connect.NewResponse(&sluicev1.UpdateQueueResponse{Queue: out}), nil
}

func (q *queueService) DeleteQueue(_ context.Context, req *connect.Request[sluicev1.DeleteQueueRequest]) (*connect.Response[sluicev1.DeleteQueueResponse], error) {
	if err := q.b.DeleteQueue(req.Msg.GetName()); err != nil {
		return nil, q.toConnect(err, qmeta(req.Msg.GetName()))
	}
	return connect.NewResponse(&sluicev1.DeleteQueueResponse{}), nil
}

func (q *queueService) PurgeQueue(ctx context.Context, req *connect.Request[sluicev1.PurgeQueueRequest]) (*connect.Response[sluicev1.PurgeQueueResponse], error) {
	name := req.Msg.GetQueue()
	if _, _, ok := splitSub(name); ok {
		return nil, apiError(connect.CodeUnimplemented, ReasonInvalidArgument,
			errors.New("purging a subscription is not supported yet"), map[string]string{"field": "queue", "queue": name})
	}
	// The broker does not count what a purge removed; the depth just before
	// is the answer, exact unless sends race with the purge.
	st, err := q.b.QueueStats(name)
	if err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	if err := q.b.PurgeQueue(ctx, name); err != nil {
		return nil, q.toConnect(err, qmeta(name))
	}
	return connect.NewResponse(&sluicev1.PurgeQueueResponse{Purged: st.Depth()}), nil
}
