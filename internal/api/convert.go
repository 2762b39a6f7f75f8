package api

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// defaultAttrType is the type of an attribute sent without one: the value
// is bytes, so "Binary" is what an SQS client reading the queue expects.
const defaultAttrType = "Binary"

func dur(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// fromDur reads an optional duration; a malformed one is an argument error
// naming field.
func fromDur(d *durationpb.Duration, field string) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, invalidArg(ReasonInvalidArgument, field, field+": "+err.Error(), nil)
	}
	return d.AsDuration(), nil
}

func queueConfigToSettings(name string, c *sluicev1.QueueConfig) (broker.QueueSettings, error) {
	s := broker.QueueSettings{Name: name}
	if c == nil {
		return s, nil
	}
	var err error
	for _, f := range []struct {
		dst   *time.Duration
		src   *durationpb.Duration
		field string
	}{
		{&s.VisibilityTimeout, c.VisibilityTimeout, "visibility_timeout"},
		{&s.Retention, c.Retention, "retention"},
		{&s.DefaultDelay, c.Delay, "delay"},
		{&s.ReceiveWait, c.ReceiveWait, "receive_wait"},
		{&s.DedupWindow, c.DeduplicationWindow, "deduplication_window"},
		{&s.MaxExtension, c.MaxVisibilityExtension, "max_visibility_extension"},
	} {
		if *f.dst, err = fromDur(f.src, f.field); err != nil {
			return s, err
		}
	}
	s.MaxMessageBytes = int(c.MaxMessageBytes)
	if dl := c.DeadLetter; dl != nil {
		s.DeadLetterQueue, s.MaxReceives = dl.Queue, int(dl.MaxReceives)
	}
	s.FIFO, s.ContentBasedDedup = c.Fifo, c.ContentBasedDeduplication
	return s, nil
}

func settingsToConfig(s broker.QueueSettings) *sluicev1.QueueConfig {
	c := &sluicev1.QueueConfig{
		VisibilityTimeout: durationpb.New(s.VisibilityTimeout), Retention: durationpb.New(s.Retention),
		Delay: durationpb.New(s.DefaultDelay), ReceiveWait: durationpb.New(s.ReceiveWait),
		MaxMessageBytes: int64(s.MaxMessageBytes), Fifo: s.FIFO, ContentBasedDeduplication: s.ContentBasedDedup,
		DeduplicationWindow: durationpb.New(s.DedupWindow), MaxVisibilityExtension: durationpb.New(s.MaxExtension),
	}
	if s.DeadLetterQueue != "" {
		c.DeadLetter = &sluicev1.DeadLetterPolicy{Queue: s.DeadLetterQueue, MaxReceives: int32(s.MaxReceives)}
	}
	return c
}

func statsToProto(st broker.QueueStats) *sluicev1.QueueStats {
	return &sluicev1.QueueStats{
		Visible: st.Visible, InFlight: st.InFlight, Delayed: st.Delayed,
		OldestMessageAge: durationpb.New(st.OldestAge), DeadLetterDepth: st.DLQDepth,
		SentTotal: st.Sent, ReceivedTotal: st.Received, AckedTotal: st.Acked,
		RedeliveredTotal: st.Redelivered, DeadLetteredTotal: st.DeadLettered,
		ExpiredTotal: st.Expired, StaleAckRefusedTotal: st.StaleRefused,
	}
}

func attrsFromProto(in map[string]*sluicev1.AttributeValue) map[string]broker.Attribute {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]broker.Attribute, len(in))
	for k, v := range in {
		typ := v.GetType()
		if typ == "" {
			typ = defaultAttrType
		}
		out[k] = broker.Attribute{DataType: typ, Value: v.GetValue()}
	}
	return out
}

func attrsToProto(in map[string]broker.Attribute) map[string]*sluicev1.AttributeValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]*sluicev1.AttributeValue, len(in))
	for k, v := range in {
		out[k] = &sluicev1.AttributeValue{Type: v.DataType, Value: v.Value}
	}
	return out
}

func sendInput(e *sluicev1.SendEntry) (broker.SendInput, error) {
	in := broker.SendInput{Body: e.GetBody(), Attributes: attrsFromProto(e.GetAttributes()),
		GroupID: e.GetGroupId(), DedupID: e.GetDeduplicationId()}
	if e.GetDelay() != nil {
		d, err := fromDur(e.GetDelay(), "delay")
		if err != nil {
			return in, err
		}
		// An explicit delay, even 0s, overrides the queue's default.
		in.Delay, in.NoDelay = d, d == 0
	}
	return in, nil
}

func sendResultToProto(r broker.SendResult) *sluicev1.SendResult {
	out := &sluicev1.SendResult{MessageId: r.ID, Duplicate: r.Duplicate}
	if r.Sequence >= 0 {
		out.Sequence = uint64(r.Sequence)
	}
	return out
}

func messageToProto(m broker.Message, seq int64) *sluicev1.Message {
	out := &sluicev1.Message{
		Id: m.ID, Body: m.Body, Attributes: attrsToProto(m.Attributes), GroupId: m.GroupID,
		DeduplicationId: m.DedupID, SendTime: ts(m.SentAt),
	}
	if seq >= 0 {
		out.Sequence = uint64(seq)
	}
	if !m.AvailableAt.IsZero() && m.AvailableAt.After(m.SentAt) {
		out.Delay = durationpb.New(m.AvailableAt.Sub(m.SentAt))
	}
	if dl := m.DeadLetter; dl != nil {
		out.DeadLetter = &sluicev1.DeadLetterInfo{
			SourceQueue: dl.SourceQueue, ReceiveCount: int32(dl.ReceiveCount),
			FirstReceiveTime: ts(dl.FirstReceiveAt), LastReceiveTime: ts(dl.LastReceiveAt),
			LastNackReason: dl.Reason, DeadLetterTime: ts(dl.At),
		}
	}
	return out
}

func deliveryToProto(d broker.Delivery) *sluicev1.Message {
	out := messageToProto(d.Message, d.Sequence)
	out.Receipt, out.ReceiveCount, out.FencingToken = d.Receipt, int32(d.ReceiveCount), d.FencingToken
	out.FirstReceiveTime, out.VisibilityDeadline = ts(d.FirstReceivedAt), ts(d.Deadline)
	return out
}
