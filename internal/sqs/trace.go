package sqs

import (
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/telemetry"
)

// Tracing (docs/sqs.md, "Trace context"). Everything here runs only when
// Config.Tracer is set; with tracing off a call has no callTrace and each
// hook returns at its first line, so responses are what they were.
//
// A message's trace context is, in order: its traceparent message
// attribute (with tracestate), as the OpenTelemetry SQS instrumentations
// set it; its AWSTraceHeader system attribute (X-Ray); else the request's
// own context (a traceparent or X-Amzn-Trace-Id HTTP header), which is
// then stored with the message as the system value traceparent, so it
// survives restarts and replication and reaches consumers of every
// protocol.

// sysTraceparent and sysTracestate are the broker.Message.System keys of a
// trace context sluice stored for a message that carried none of its own.
const (
	sysTraceparent = telemetry.Traceparent
	sysTracestate  = telemetry.Tracestate
)

// tracedActions are the actions that get a span, and their
// messaging.operation.name and type.
var tracedActions = map[string][2]string{
	"SendMessage":        {"send", telemetry.TypeSend},
	"SendMessageBatch":   {"send", telemetry.TypeSend},
	"ReceiveMessage":     {"receive", telemetry.TypeReceive},
	"DeleteMessage":      {"delete", telemetry.TypeSettle},
	"DeleteMessageBatch": {"delete", telemetry.TypeSettle},
}

// callTrace is what a traced call gathers for its span.
type callTrace struct {
	start  time.Time
	parent trace.SpanContext
	dest   string
	msgs   []trace.SpanContext
	count  int
}

// traceStart begins c's span if tracing is on and the action is traced.
func (h *Handler) traceStart(r *http.Request, c *call, start time.Time) {
	if !h.cfg.Tracer.Enabled() {
		return
	}
	if _, ok := tracedActions[c.action]; !ok {
		return
	}
	c.tr = &callTrace{start: start, parent: telemetry.MessageContext(
		r.Header.Get(telemetry.Traceparent), r.Header.Get(telemetry.Tracestate), r.Header.Get(telemetry.XRayHeader))}
}

// traceDest notes the queue a traced call named.
func (c *call) traceDest(name string) {
	if c.tr != nil {
		c.tr.dest = name
	}
}

// traceEnd records c's span.
func (h *Handler) traceEnd(c *call, err error) {
	if c.tr == nil {
		return
	}
	op := tracedActions[c.action]
	s := &telemetry.Span{System: telemetry.SystemSQS, Op: op[0], Type: op[1], Dest: c.tr.dest, Start: c.tr.start,
		Parent: c.tr.parent, Messages: c.tr.msgs, Count: c.tr.count, Batch: c.action != "SendMessage" && c.action != "DeleteMessage",
		Attrs: []attribute.KeyValue{attribute.String("rpc.method", c.action)}}
	if err != nil {
		code := "_OTHER"
		var ae *apiError
		if errors.As(err, &ae) {
			code = ae.kind.code
		}
		s.Err = telemetry.ErrCode(code)
	}
	h.cfg.Tracer.Record(s)
}

// traceSend notes one message sent, storing the request's context with
// it when it carries none of its own.
func (c *call) traceSend(in *broker.SendInput) {
	if c.tr == nil {
		return
	}
	c.tr.count++
	sc := messageContext(in.Attributes, in.System)
	if !sc.IsValid() && c.tr.parent.IsValid() {
		sc = c.tr.parent
		tp, ts := telemetry.FormatTraceparent(sc)
		in.System[sysTraceparent] = tp
		if ts != "" {
			in.System[sysTracestate] = ts
		}
	}
	c.tr.msgs = append(c.tr.msgs, sc)
}

// traceDeleted counts the receipts a delete settled.
func (c *call) traceDeleted(n int) {
	if c.tr != nil {
		c.tr.count += n
	}
}

// traceDelivered notes one delivered message and shows its trace context
// as the consumer asked for it: AWSTraceHeader (X-Ray form of whatever
// context the message has) among the system attributes, and traceparent /
// tracestate among the message attributes when the message has only a
// stored one (a message that brought its own has it already).
func (c *call) traceDelivered(d broker.Delivery, m *message, sysNames, attrNames []string) {
	if c.tr == nil {
		return
	}
	c.tr.count++
	sc := messageContext(d.Attributes, d.System)
	c.tr.msgs = append(c.tr.msgs, sc)
	if !sc.IsValid() {
		return
	}
	if m.Attributes != nil && d.System[sysTraceHeader] == "" && (contains(sysNames, "All") || contains(sysNames, sysTraceHeader)) {
		m.Attributes[sysTraceHeader] = telemetry.FormatXRay(sc)
	}
	if _, own := d.Attributes[telemetry.Traceparent]; own {
		return
	}
	tp, ts := telemetry.FormatTraceparent(sc)
	extra := map[string]broker.Attribute{telemetry.Traceparent: {DataType: "String", Value: []byte(tp)}}
	if ts != "" {
		extra[telemetry.Tracestate] = broker.Attribute{DataType: "String", Value: []byte(ts)}
	}
	add := pickAttributes(extra, attrNames)
	if len(add) == 0 {
		return
	}
	picked := pickAttributes(d.Attributes, attrNames)
	for k, v := range add {
		picked[k] = v
	}
	m.MessageAttributes = fromBroker(picked)
	m.MD5OfMessageAttributes = md5OfAttributes(picked)
}

// messageContext is the trace context a queue message carries.
func messageContext(attrs map[string]broker.Attribute, sys map[string]string) trace.SpanContext {
	if a, ok := attrs[telemetry.Traceparent]; ok {
		if sc := telemetry.ParseTraceparent(string(a.Value), string(attrs[telemetry.Tracestate].Value)); sc.IsValid() {
			return sc
		}
	}
	return telemetry.MessageContext(sys[sysTraceparent], sys[sysTracestate], sys[sysTraceHeader])
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
