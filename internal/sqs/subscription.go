package sqs

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
)

// Subscriptions read over SQS (docs/sqs.md, "Subscriptions"). A fan-out
// subscription is a queue cursor over a topic, addressed as the native
// API addresses it, "<topic>/<subscription>"; in a queue URL the slash is
// escaped (".../000000000000/events%2Faudit"), so the path still has one
// segment per name and no queue URL changes meaning ("/" never occurs in
// a queue name). ReceiveMessage, DeleteMessage(Batch) and
// ChangeMessageVisibility(Batch) and GetQueueUrl serve them: records
// produced over Kafka or the native API are consumed by SQS clients. The
// other actions answer QueueDoesNotExist, as for any name that is not a
// queue.

// splitSub reads a queue name: "<topic>/<subscription>" names a
// subscription.
func splitSub(name string) (topic, sub string, ok bool) { return strings.Cut(name, "/") }

// receiveSubscription is ReceiveMessage of a subscription: each record
// becomes a message whose body is the record's value, whose message
// attributes are its headers (String when the value is SQS text, else
// Binary), and whose id is "<partition>-<offset>".
func (h *Handler) receiveSubscription(c *call, name string, opts broker.ReceiveOptions, sysNames, attrNames []string) (any, error) {
	topic, sub, _ := splitSub(name)
	if opts.Wait == broker.WaitQueueDefault {
		opts.Wait = 0 // a subscription has no ReceiveMessageWaitTimeSeconds
	}
	ds, err := h.b.SubscriptionReceive(c.ctx, topic, sub, opts)
	if err != nil && c.ctx.Err() != nil {
		return receiveMessageOutput{}, nil // the client hung up during a long poll
	}
	if err != nil {
		return nil, subAPIError(err)
	}
	s := broker.QueueSettings{Name: name}
	out := receiveMessageOutput{}
	for _, sd := range ds {
		d := subDelivery(sd)
		m := h.message(d, s, sysNames, attrNames)
		c.traceDelivered(d, &m, sysNames, attrNames)
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}

func subDelivery(sd broker.SubscriptionDelivery) broker.Delivery {
	d := broker.Delivery{
		Message: broker.Message{ID: strconv.Itoa(int(sd.Partition)) + "-" + strconv.FormatInt(sd.Offset, 10),
			Body: sd.Value, SentAt: sd.Timestamp},
		Sequence: sd.Offset, Receipt: sd.Receipt, ReceiveCount: sd.ReceiveCount,
		FirstReceivedAt: sd.FirstReceivedAt, Deadline: sd.Deadline, FencingToken: sd.FencingToken,
	}
	for _, hd := range sd.Headers {
		if d.Attributes == nil {
			d.Attributes = make(map[string]broker.Attribute, len(sd.Headers))
		}
		typ := "String"
		if len(hd.Value) == 0 || checkChars(string(hd.Value)) != nil {
			typ = "Binary"
		}
		d.Attributes[hd.Key] = broker.Attribute{DataType: typ, Value: hd.Value}
	}
	return d
}

// subAPIError maps a subscription's errors: a missing topic or
// subscription is a queue that does not exist.
func subAPIError(err error) *apiError {
	if errors.Is(err, broker.ErrSubscriptionNotFound) || errors.Is(err, broker.ErrTopicNotFound) {
		return noSuchQueue()
	}
	return toAPIError(err)
}

// ackOne, ackMany, extend and exists route a lease operation to a queue
// or a subscription by name.

func (h *Handler) ackOne(ctx context.Context, name, receipt string) error {
	if topic, sub, ok := splitSub(name); ok {
		return h.b.SubscriptionAck(ctx, topic, sub, receipt)
	}
	return h.b.Ack(ctx, name, receipt)
}

func (h *Handler) ackMany(ctx context.Context, name string, receipts []string) ([]error, error) {
	if topic, sub, ok := splitSub(name); ok {
		errs, err := h.b.SubscriptionAckBatch(ctx, topic, sub, receipts)
		if err != nil {
			return nil, subAPIError(err)
		}
		return errs, nil
	}
	return h.b.AckBatch(ctx, name, receipts)
}

func (h *Handler) extend(ctx context.Context, name, receipt string, d time.Duration) error {
	if topic, sub, ok := splitSub(name); ok {
		return h.b.SubscriptionExtend(ctx, topic, sub, receipt, d)
	}
	return h.b.Extend(ctx, name, receipt, d)
}

func (h *Handler) exists(name string) error {
	if topic, sub, ok := splitSub(name); ok {
		if _, err := h.b.GetSubscription(topic, sub); err != nil {
			return subAPIError(err)
		}
		return nil
	}
	_, err := h.b.GetQueue(name)
	return err
}
