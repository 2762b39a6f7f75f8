package api

import (
	"context"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// splitSub reads a QueueService name: "<topic>/<subscription>" names a
// subscription ("/" never occurs in a queue name), anything else a queue.
func splitSub(name string) (topic, sub string, ok bool) {
	return strings.Cut(name, "/")
}

// The four lease operations, routed to a queue or a subscription by name,
// so one receive/ack path in the handlers serves both.

func (a *API) receive(ctx context.Context, name string, opts broker.ReceiveOptions) ([]*sluicev1.Message, error) {
	topic, sub, isSub := splitSub(name)
	if !isSub {
		ds, err := a.b.Receive(ctx, name, opts)
		out := make([]*sluicev1.Message, len(ds))
		for i, d := range ds {
			out[i] = deliveryToProto(d)
			a.traceDelivered(d, out[i])
		}
		return out, err
	}
	if opts.Wait == broker.WaitQueueDefault {
		opts.Wait = 0
	}
	ds, err := a.b.SubscriptionReceive(ctx, topic, sub, opts)
	out := make([]*sluicev1.Message, len(ds))
	for i, d := range ds {
		out[i] = subDeliveryToProto(d)
	}
	return out, err
}

func (a *API) ack(ctx context.Context, name, receipt string) error {
	if topic, sub, ok := splitSub(name); ok {
		return a.b.SubscriptionAck(ctx, topic, sub, receipt)
	}
	return a.b.Ack(ctx, name, receipt)
}

func (a *API) extend(ctx context.Context, name, receipt string, d time.Duration) error {
	if topic, sub, ok := splitSub(name); ok {
		return a.b.SubscriptionExtend(ctx, topic, sub, receipt, d)
	}
	return a.b.Extend(ctx, name, receipt, d)
}

func (a *API) nack(ctx context.Context, name, receipt string, delay time.Duration, reason string) error {
	if topic, sub, ok := splitSub(name); ok {
		return a.b.SubscriptionNack(ctx, topic, sub, receipt, delay, reason)
	}
	return a.b.Nack(ctx, name, receipt, delay, reason)
}

// subDeliveryToProto presents a record as a queue message: the value is the
// body, headers are attributes, and the key, which orders a key-ordered
// subscription, is the group id.
func subDeliveryToProto(d broker.SubscriptionDelivery) *sluicev1.Message {
	m := &sluicev1.Message{
		Id: fmt.Sprintf("%d-%d", d.Partition, d.Offset), Body: d.Value, GroupId: string(d.Key),
		SendTime: ts(d.Timestamp), Sequence: uint64(max(d.Offset, 0)), Receipt: d.Receipt,
		ReceiveCount: int32(d.ReceiveCount), FirstReceiveTime: ts(d.FirstReceivedAt),
		FencingToken: d.FencingToken, VisibilityDeadline: ts(d.Deadline),
	}
	for _, h := range d.Headers {
		if m.Attributes == nil {
			m.Attributes = map[string]*sluicev1.AttributeValue{}
		}
		m.Attributes[h.Key] = &sluicev1.AttributeValue{Type: defaultAttrType, Value: h.Value}
	}
	return m
}

func subSettings(topic, name string, c *sluicev1.SubscriptionConfig) (broker.SubscriptionSettings, error) {
	s := broker.SubscriptionSettings{Topic: topic, Name: name, KeyOrdered: c.GetKeyOrdered(), FromEarliest: c.GetFromEarliest()}
	q := c.GetQueue()
	var err error
	if s.VisibilityTimeout, err = fromDur(q.GetVisibilityTimeout(), "visibility_timeout"); err != nil {
		return s, err
	}
	if s.MaxExtension, err = fromDur(q.GetMaxVisibilityExtension(), "max_visibility_extension"); err != nil {
		return s, err
	}
	if s.DeliveryDelay, err = fromDur(q.GetDelay(), "delay"); err != nil {
		return s, err
	}
	if dl := q.GetDeadLetter(); dl != nil {
		s.DeadLetterQueue, s.MaxReceives = dl.GetQueue(), int(dl.GetMaxReceives())
	}
	return s, nil
}

// withStats adds a subscription's current stats to its proto (left unset
// if the subscription went away meanwhile).
func (a *API) withStats(p *sluicev1.Subscription) *sluicev1.Subscription {
	if st, err := a.b.SubscriptionStats(p.GetTopic(), p.GetName()); err == nil {
		p.Stats = statsToProto(st)
	}
	return p
}

func subProto(s broker.SubscriptionSettings) *sluicev1.Subscription {
	q := &sluicev1.QueueConfig{VisibilityTimeout: dur(s.VisibilityTimeout), MaxVisibilityExtension: dur(s.MaxExtension),
		Delay: dur(s.DeliveryDelay)}
	if s.DeadLetterQueue != "" {
		q.DeadLetter = &sluicev1.DeadLetterPolicy{Queue: s.DeadLetterQueue, MaxReceives: int32(s.MaxReceives)}
	}
	return &sluicev1.Subscription{Topic: s.Topic, Name: s.Name, CreateTime: ts(s.CreatedAt),
		Config: &sluicev1.SubscriptionConfig{Queue: q, KeyOrdered: s.KeyOrdered, FromEarliest: s.FromEarliest}}
}

func smeta(topic, name string) map[string]string {
	return map[string]string{"topic": topic, "subscription": name}
}

func (t *topicService) CreateSubscription(_ context.Context, req *connect.Request[sluicev1.CreateSubscriptionRequest]) (*connect.Response[sluicev1.CreateSubscriptionResponse], error) {
	m := req.Msg
	s, err := subSettings(m.GetTopic(), m.GetName(), m.GetConfig())
	if err != nil {
		return nil, err
	}
	if s, err = t.b.CreateSubscription(s); err != nil {
		return nil, t.toConnect(err, smeta(m.GetTopic(), m.GetName()))
	}
	return connect.NewResponse(&sluicev1.CreateSubscriptionResponse{Subscription: t.withStats(subProto(s))}), nil
}

func (t *topicService) GetSubscription(_ context.Context, req *connect.Request[sluicev1.GetSubscriptionRequest]) (*connect.Response[sluicev1.GetSubscriptionResponse], error) {
	s, err := t.b.GetSubscription(req.Msg.GetTopic(), req.Msg.GetName())
	if err != nil {
		return nil, t.toConnect(err, smeta(req.Msg.GetTopic(), req.Msg.GetName()))
	}
	return connect.NewResponse(&sluicev1.GetSubscriptionResponse{Subscription: t.withStats(subProto(s))}), nil
}

func (t *topicService) ListSubscriptions(_ context.Context, req *connect.Request[sluicev1.ListSubscriptionsRequest]) (*connect.Response[sluicev1.ListSubscriptionsResponse], error) {
	subs, err := t.b.ListSubscriptions(req.Msg.GetTopic())
	if err != nil {
		return nil, t.toConnect(err, tmeta(req.Msg.GetTopic()))
	}
	out := &sluicev1.ListSubscriptionsResponse{}
	for _, s := range subs {
		out.Subscriptions = append(out.Subscriptions, t.withStats(subProto(s)))
	}
	return connect.NewResponse(out), nil
}

func (t *topicService) DeleteSubscription(_ context.Context, req *connect.Request[sluicev1.DeleteSubscriptionRequest]) (*connect.Response[sluicev1.DeleteSubscriptionResponse], error) {
	if err := t.b.DeleteSubscription(req.Msg.GetTopic(), req.Msg.GetName()); err != nil {
		return nil, t.toConnect(err, smeta(req.Msg.GetTopic(), req.Msg.GetName()))
	}
	return connect.NewResponse(&sluicev1.DeleteSubscriptionResponse{}), nil
}

// subscriptionAsQueue answers GetQueue for "<topic>/<subscription>": its
// queue config and stats.
func (a *API) subscriptionAsQueue(topic, name string) (*sluicev1.Queue, error) {
	s, err := a.b.GetSubscription(topic, name)
	if err != nil {
		return nil, a.toConnect(err, smeta(topic, name))
	}
	p := a.withStats(subProto(s))
	return &sluicev1.Queue{Name: topic + "/" + name, Config: p.GetConfig().GetQueue(), Stats: p.GetStats(), CreateTime: p.GetCreateTime()}, nil
}
