// Package telemetry owns sluice's OpenTelemetry tracing: the tracer
// provider and its OTLP/HTTP exporter (when an endpoint is configured),
// the reading and writing of a message's trace context (W3C traceparent and
// tracestate, the X-Ray AWSTraceHeader), and the one way a front-end
// records a span (Record), with the messaging semantic conventions.
//
// Off is a nil *Tracer: every method of a nil Tracer returns at once, and a
// front-end checks Enabled before it builds anything for a span, so with
// no endpoint no tracer provider is installed and the hot paths do no
// tracing work and no allocation for it (docs/benchmarks.md, "Tracing off").
//
// It must never import the broker, a front-end, the server or the node:
// front-ends call it with plain strings and span contexts, so what is
// traced and how it is named lives in one place and the broker's state
// machines stay free of tracing. It never installs a global provider
// (otel.SetTracerProvider): a test's or embedding program's own provider
// is left alone.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config says where spans go and how many are kept.
type Config struct {
	// Endpoint is the OTLP/HTTP collector: a URL ("http://host:4318",
	// "https://host:4318/v1/traces"; a URL without a path gets
	// /v1/traces) or a bare host:port (plain HTTP). Empty: tracing off.
	Endpoint string
	// SampleRatio is the share of traces sluice starts itself (requests
	// that carry no trace context) that are sampled, 0 to 1. A request
	// that carries a context follows its sampled flag (parent-based).
	SampleRatio float64
	// ServiceName and Version name this process in every span's resource.
	ServiceName string
	Version     string
	// Exporter replaces the OTLP exporter (tests); nil: OTLP/HTTP to Endpoint.
	Exporter sdktrace.SpanExporter
	// Logger gets the SDK's errors (a collector that is down), at most one
	// every ten seconds; nil: slog.Default().
	Logger *slog.Logger
}

// Tracer records sluice's spans. A nil *Tracer is tracing off.
type Tracer struct {
	tp *sdktrace.TracerProvider
	tr trace.Tracer
}

// New returns the tracer cfg describes, or nil (off) when cfg names no
// endpoint and no exporter. The exporter connects lazily: a collector that
// is down costs dropped spans, never a failed start.
func New(cfg Config) (*Tracer, error) {
	if cfg.Endpoint == "" && cfg.Exporter == nil {
		return nil, nil
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 {
		return nil, fmt.Errorf("trace sample ratio %v: want 0 to 1", cfg.SampleRatio)
	}
	exp := cfg.Exporter
	if exp == nil {
		opts, err := endpointOptions(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		// New does not dial: the first batch is sent when it is full or
		// its timer fires.
		if exp, err = otlptracehttp.New(context.Background(), opts...); err != nil {
			return nil, fmt.Errorf("otlp exporter: %w", err)
		}
	}
	name := cfg.ServiceName
	if name == "" {
		name = "sluice"
	}
	kvs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.Version != "" {
		kvs = append(kvs, attribute.String("service.version", cfg.Version))
	}
	res := resource.NewSchemaless(kvs...)
	// The SDK reports export failures through the process-wide handler,
	// which by default prints to stderr past the server's structured log.
	otel.SetErrorHandler(newErrorLog(cfg.Logger))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/sluice-mq/sluice")}, nil
}

// endpointOptions reads Endpoint as a URL or host:port.
func endpointOptions(ep string) ([]otlptracehttp.Option, error) {
	if !strings.Contains(ep, "://") {
		if strings.ContainsAny(ep, "/?#") || !strings.Contains(ep, ":") {
			return nil, fmt.Errorf("otlp endpoint %q: want host:port or an http(s):// URL", ep)
		}
		return []otlptracehttp.Option{otlptracehttp.WithEndpoint(ep), otlptracehttp.WithInsecure()}, nil
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp endpoint %q: want host:port or an http(s):// URL", ep)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}, nil
}

// Enabled reports whether spans are recorded; front-ends check it before
// they build anything for one.
func (t *Tracer) Enabled() bool { return t != nil }

// Shutdown sends the spans still buffered, waiting at most until ctx ends.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// ForceFlush sends the spans buffered so far (tests).
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Messaging systems, as messaging.system names them. The native API has
// no registered value; "sluice" it is.
const (
	SystemKafka  = "kafka"
	SystemSQS    = "aws_sqs"
	SystemNative = "sluice"
)

// Operation types (messaging.operation.type).
const (
	TypeSend    = "send"
	TypeReceive = "receive"
	TypeSettle  = "settle"
)

// Span is one server-side operation, recorded after it finished (so that
// the parent can be chosen from what it delivered).
type Span struct {
	System string // messaging.system
	Op     string // messaging.operation.name: send, receive, ack, produce, fetch, commit, ...
	Type   string // messaging.operation.type
	Dest   string // messaging.destination.name; empty when the request named several
	Start  time.Time
	// Parent is the request's own trace context (a header), if any.
	Parent trace.SpanContext
	// Messages are the trace contexts of the messages sent or delivered
	// (invalid ones are skipped). Each becomes a link; with no Parent and
	// exactly one valid message context, that context is the parent, so a
	// consumer's receive of one message lands in its producer's trace.
	Messages []trace.SpanContext
	// Count is messaging.batch.message_count when above 1 (or Batch).
	Count int
	Batch bool // a batch call: report Count even when it is 0 or 1
	Attrs []attribute.KeyValue
	Err   error
}

// Record exports s as a span (if sampled).
func (t *Tracer) Record(s *Span) {
	if t == nil {
		return
	}
	links := make([]trace.Link, 0, len(s.Messages))
	var only trace.SpanContext
	n := 0
	for _, sc := range s.Messages {
		if !sc.IsValid() {
			continue
		}
		links = append(links, trace.Link{SpanContext: sc})
		only = sc
		n++
	}
	parent := s.Parent
	if !parent.IsValid() && n == 1 {
		parent = only
	}
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	attrs := append(make([]attribute.KeyValue, 0, 6+len(s.Attrs)),
		attribute.String("messaging.system", s.System),
		attribute.String("messaging.operation.name", s.Op),
		attribute.String("messaging.operation.type", s.Type),
	)
	name := s.Op
	if s.Dest != "" {
		attrs = append(attrs, attribute.String("messaging.destination.name", s.Dest))
		name += " " + s.Dest
	}
	if s.Count > 1 || s.Batch {
		attrs = append(attrs, attribute.Int("messaging.batch.message_count", s.Count))
	}
	attrs = append(attrs, s.Attrs...)
	_, span := t.tr.Start(ctx, name, trace.WithTimestamp(s.Start), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
	if s.Err != nil {
		span.RecordError(s.Err)
		span.SetStatus(codes.Error, errText(s.Err))
		span.SetAttributes(attribute.String("error.type", errType(s.Err)))
	}
	span.End()
}

// ErrCode is an error a front-end reports by its protocol's code (a Kafka
// error code name, an SQS error code, a Connect code): the span's
// error.type.
type ErrCode string

func (e ErrCode) Error() string { return string(e) }

func errType(err error) string {
	var c ErrCode
	if errors.As(err, &c) {
		return string(c)
	}
	return "_OTHER"
}

func errText(err error) string {
	s := err.Error()
	if len(s) > 256 {
		s = s[:256]
	}
	return s
}

// errorLog logs the SDK's errors, at most one per interval: a collector
// that is down fails every export, and one line says so.
type errorLog struct {
	log      *slog.Logger
	last     atomic.Int64 // unix nanoseconds of the last line
	dropped  atomic.Int64
	interval time.Duration
}

func newErrorLog(l *slog.Logger) *errorLog {
	if l == nil {
		l = slog.Default()
	}
	return &errorLog{log: l, interval: 10 * time.Second}
}

func (e *errorLog) Handle(err error) {
	now := time.Now().UnixNano()
	last := e.last.Load()
	if now-last < int64(e.interval) || !e.last.CompareAndSwap(last, now) {
		e.dropped.Add(1)
		return
	}
	e.log.Warn("tracing: spans not exported", "err", err, "errors_since_last", e.dropped.Swap(0))
}
