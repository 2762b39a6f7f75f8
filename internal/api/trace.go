package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/telemetry"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// Tracing (docs/api.md, "Trace context"). The interceptor is installed
// only when Options.Tracer is set, so with tracing off no call pays for it.
//
// A call's own context is its traceparent / tracestate HTTP header (gRPC
// metadata is the same headers). A message's context is its traceparent
// attribute (queues) or record header (topics); a message that brings none
// is stored with the call's: a record gets a traceparent header, a queue
// message the system value traceparent (which SQS consumers see as
// AWSTraceHeader or a traceparent attribute, and native consumers as a
// traceparent attribute of type String).

// tracedProcs maps the traced procedures (by method name) to their
// messaging.operation.name and type.
var tracedProcs = map[string][2]string{
	"Send":          {"send", telemetry.TypeSend},
	"SendBatch":     {"send", telemetry.TypeSend},
	"Receive":       {"receive", telemetry.TypeReceive},
	"Ack":           {"ack", telemetry.TypeSettle},
	"AckBatch":      {"ack", telemetry.TypeSettle},
	"Nack":          {"nack", telemetry.TypeSettle},
	"Produce":       {"produce", telemetry.TypeSend},
	"Fetch":         {"fetch", telemetry.TypeReceive},
	"CommitOffsets": {"commit", telemetry.TypeSettle},
}

type traceCtxKey struct{}

// traceInterceptor records a span for each traced unary call.
type traceInterceptor struct{ t *telemetry.Tracer }

func (ti traceInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		p := req.Spec().Procedure
		op, ok := tracedProcs[p[strings.LastIndexByte(p, '/')+1:]]
		if !ok {
			return next(ctx, req)
		}
		s := &telemetry.Span{System: telemetry.SystemNative, Op: op[0], Type: op[1], Start: time.Now(),
			Parent: headerContext(req.Header()), Attrs: []attribute.KeyValue{attribute.String("rpc.method", p)}}
		if s.Parent.IsValid() {
			ctx = context.WithValue(ctx, traceCtxKey{}, s.Parent)
		}
		if pr, ok := req.Any().(*sluicev1.ProduceRequest); ok {
			stampRecords(pr, s.Parent)
		}
		resp, err := next(ctx, req)
		describeCall(s, req.Any(), resp)
		if err != nil {
			s.Err = telemetry.ErrCode(connect.CodeOf(err).String())
			var ce *connect.Error
			if errors.As(err, &ce) {
				if r := reasonOf(ce); r != "" {
					s.Err = telemetry.ErrCode(r)
				}
			}
		}
		ti.t.Record(s)
		return resp, err
	}
}

func (traceInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (traceInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func headerContext(h http.Header) trace.SpanContext {
	return telemetry.ParseTraceparent(h.Get(telemetry.Traceparent), h.Get(telemetry.Tracestate))
}

// stampRecords gives every record without a valid traceparent header the
// call's context (a malformed one is replaced: it would be ignored anyway).
func stampRecords(pr *sluicev1.ProduceRequest, sc trace.SpanContext) {
	if !sc.IsValid() {
		return
	}
	tp, _ := telemetry.FormatTraceparent(sc)
	for _, r := range pr.GetRecords() {
		if !recordContext(r.GetHeaders()).IsValid() {
			r.Headers = append(dropHeader(r.Headers, telemetry.Traceparent), &sluicev1.Header{Key: telemetry.Traceparent, Value: []byte(tp)})
		}
	}
}

func dropHeader(hs []*sluicev1.Header, key string) []*sluicev1.Header {
	out := hs[:0]
	for _, h := range hs {
		if h.GetKey() != key {
			out = append(out, h)
		}
	}
	return out
}

func recordContext(hs []*sluicev1.Header) trace.SpanContext {
	var tp, ts string
	for _, h := range hs {
		switch h.GetKey() {
		case telemetry.Traceparent:
			tp = string(h.GetValue())
		case telemetry.Tracestate:
			ts = string(h.GetValue())
		}
	}
	return telemetry.ParseTraceparent(tp, ts)
}

func attrContext(attrs map[string]*sluicev1.AttributeValue) trace.SpanContext {
	return telemetry.ParseTraceparent(string(attrs[telemetry.Traceparent].GetValue()), string(attrs[telemetry.Tracestate].GetValue()))
}

// describeCall fills in the span's destination, size and message contexts
// from the request and the response.
func describeCall(s *telemetry.Span, req any, resp connect.AnyResponse) {
	var out any
	if resp != nil {
		out = resp.Any()
	}
	switch r := req.(type) {
	case *sluicev1.SendRequest:
		s.Dest = r.GetQueue()
		s.Messages = []trace.SpanContext{orParent(attrContext(r.GetMessage().GetAttributes()), s.Parent)}
		s.Count = 1
	case *sluicev1.SendBatchRequest:
		s.Dest, s.Batch, s.Count = r.GetQueue(), true, len(r.GetMessages())
		for _, e := range r.GetMessages() {
			s.Messages = append(s.Messages, orParent(attrContext(e.GetAttributes()), s.Parent))
		}
	case *sluicev1.ReceiveRequest:
		s.Dest, s.Batch = r.GetQueue(), true
		if o, ok := out.(*sluicev1.ReceiveResponse); ok {
			s.Count = len(o.GetMessages())
			for _, m := range o.GetMessages() {
				s.Messages = append(s.Messages, attrContext(m.GetAttributes()))
			}
		}
	case *sluicev1.AckRequest:
		s.Dest, s.Count = r.GetQueue(), 1
	case *sluicev1.AckBatchRequest:
		s.Dest, s.Batch, s.Count = r.GetQueue(), true, len(r.GetReceipts())
	case *sluicev1.NackRequest:
		s.Dest, s.Count = r.GetQueue(), 1
	case *sluicev1.ProduceRequest:
		s.Dest, s.Batch, s.Count = r.GetTopic(), true, len(r.GetRecords())
		for _, rec := range r.GetRecords() {
			s.Messages = append(s.Messages, recordContext(rec.GetHeaders()))
		}
	case *sluicev1.FetchRequest:
		s.Dest, s.Batch = r.GetTopic(), true
		if o, ok := out.(*sluicev1.FetchResponse); ok {
			for _, p := range o.GetPartitions() {
				for _, rec := range p.GetRecords() {
					s.Count++
					s.Messages = append(s.Messages, recordContext(rec.GetHeaders()))
				}
			}
		}
	case *sluicev1.CommitOffsetsRequest:
		s.Batch, s.Count = true, len(r.GetOffsets())
		s.Attrs = append(s.Attrs, attribute.String("messaging.consumer.group.name", r.GetGroup()))
	}
}

func orParent(sc, parent trace.SpanContext) trace.SpanContext {
	if sc.IsValid() {
		return sc
	}
	return parent
}

// traceSend stores the call's context with a queue message that brings
// none of its own (a no-op with tracing off: no context is in ctx).
func (a *API) traceSend(ctx context.Context, in *broker.SendInput) {
	if !a.tracer.Enabled() {
		return
	}
	sc, ok := ctx.Value(traceCtxKey{}).(trace.SpanContext)
	if !ok {
		return
	}
	if a, own := in.Attributes[telemetry.Traceparent]; own && telemetry.ParseTraceparent(string(a.Value), "").IsValid() {
		return
	}
	tp, ts := telemetry.FormatTraceparent(sc)
	if in.System == nil {
		in.System = map[string]string{}
	}
	in.System[telemetry.Traceparent] = tp
	if ts != "" {
		in.System[telemetry.Tracestate] = ts
	}
}

// reasonOf is the ErrorInfo reason a Connect error carries, if any.
func reasonOf(ce *connect.Error) string {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*sluicev1.ErrorInfo); ok {
				return info.GetReason()
			}
		}
	}
	return ""
}

// traceDelivered shows a queue message's stored context (or its SQS
// AWSTraceHeader) as a traceparent attribute when it has none of its own.
func (a *API) traceDelivered(d broker.Delivery, m *sluicev1.Message) {
	if !a.tracer.Enabled() || attrContext(m.GetAttributes()).IsValid() {
		return
	}
	sc := telemetry.MessageContext(d.System[telemetry.Traceparent], d.System[telemetry.Tracestate], d.System["AWSTraceHeader"])
	if !sc.IsValid() {
		return
	}
	tp, ts := telemetry.FormatTraceparent(sc)
	if m.Attributes == nil {
		m.Attributes = map[string]*sluicev1.AttributeValue{}
	}
	m.Attributes[telemetry.Traceparent] = &sluicev1.AttributeValue{Type: "String", Value: []byte(tp)}
	if ts != "" {
		m.Attributes[telemetry.Tracestate] = &sluicev1.AttributeValue{Type: "String", Value: []byte(ts)}
	}
}

// traceNow is the start of a span, or zero with tracing off (no clock read).
func (a *API) traceNow() time.Time {
	if !a.tracer.Enabled() {
		return time.Time{}
	}
	return time.Now()
}

// traceConsumed records a receive span for each batch a Consume stream
// delivers (a stream is long; one span per delivery batch, parented to
// the stream's header context or the one message's, like Receive). An
// empty batch (the stream's wait ended) gets none.
func (a *API) traceConsumed(h http.Header, name string, start time.Time, msgs []*sluicev1.Message) {
	if !a.tracer.Enabled() || len(msgs) == 0 {
		return
	}
	s := &telemetry.Span{System: telemetry.SystemNative, Op: "receive", Type: telemetry.TypeReceive, Dest: name, Start: start,
		Parent: headerContext(h), Batch: true, Count: len(msgs),
		Attrs: []attribute.KeyValue{attribute.String("rpc.method", sluicev1connect.QueueServiceConsumeProcedure)}}
	for _, m := range msgs {
		s.Messages = append(s.Messages, attrContext(m.GetAttributes()))
	}
	a.tracer.Record(s)
}
