package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-mq/sluice/internal/telemetry/otlptest"
)

func TestOffIsNil(t *testing.T) {
	tr, err := New(Config{})
	if err != nil || tr != nil || tr.Enabled() {
		t.Fatalf("no endpoint: want a nil tracer, got %v, %v", tr, err)
	}
	tr.Record(&Span{Op: "send"}) // a nil tracer records nothing and does not panic
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestEndpointForms(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:4318", "http://127.0.0.1:4318", "https://collector:4318/v1/traces"} {
		if _, err := endpointOptions(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"collector", "ftp://x:1", "http://", "host:1/path"} {
		if _, err := endpointOptions(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := New(Config{Endpoint: "127.0.0.1:4318", SampleRatio: 1.5}); err == nil {
		t.Error("ratio 1.5 accepted")
	}
}

// TestRecordOverOTLP sends spans through the real OTLP/HTTP exporter to
// an in-process collector: a request context is the parent; without one,
// a single message's context is; with several messages, each is a link
// and the span starts a trace of its own.
func TestRecordOverOTLP(t *testing.T) {
	col := otlptest.Start()
	defer col.Close()
	tr, err := New(Config{Endpoint: col.URL(), SampleRatio: 1, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	req := ParseTraceparent("00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01", "")
	msg1 := ParseTraceparent(tpSampled, "")
	msg2 := ParseTraceparent("00-cccccccccccccccccccccccccccccccc-dddddddddddddddd-01", "")
	start := time.Now().Add(-time.Millisecond)
	tr.Record(&Span{System: SystemSQS, Op: "receive", Type: TypeReceive, Dest: "q", Start: start, Parent: req, Messages: []trace.SpanContext{msg1}})
	tr.Record(&Span{System: SystemSQS, Op: "receive", Type: TypeReceive, Dest: "one", Start: start, Messages: []trace.SpanContext{msg1, {}}})
	tr.Record(&Span{System: SystemKafka, Op: "fetch", Type: TypeReceive, Dest: "two", Start: start, Count: 2, Messages: []trace.SpanContext{msg1, msg2},
		Attrs: []attribute.KeyValue{attribute.Int("messaging.destination.partition.id", 3)}, Err: ErrCode("NOT_LEADER_OR_FOLLOWER")})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	byName := map[string]otlptest.Span{}
	for _, s := range col.Spans() {
		byName[s.Name] = s
	}
	s := byName["receive q"]
	if s.TraceID != "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" || s.ParentID != "bbbbbbbbbbbbbbbb" || len(s.Links) != 1 || s.Links[0].SpanID != sidHex {
		t.Errorf("request context as parent, message as link: %+v", s)
	}
	if s.Attrs["messaging.system"] != "aws_sqs" || s.Attrs["messaging.operation.type"] != "receive" || s.Attrs["messaging.destination.name"] != "q" || s.Service != "sluice" {
		t.Errorf("attributes: %+v", s)
	}
	if s := byName["receive one"]; s.TraceID != tidHex || s.ParentID != sidHex || len(s.Links) != 1 {
		t.Errorf("one message, no request context: the message's is the parent: %+v", s)
	}
	s = byName["fetch two"]
	if s.ParentID != "" || len(s.Links) != 2 || s.Attrs["messaging.batch.message_count"] != "2" || s.Attrs["messaging.destination.partition.id"] != "3" {
		t.Errorf("two messages: a root span with two links: %+v", s)
	}
	if s.Status != 2 || s.Attrs["error.type"] != "NOT_LEADER_OR_FOLLOWER" {
		t.Errorf("error: %+v", s)
	}
	if errType(errors.New("x")) != "_OTHER" {
		t.Error("an uncoded error is _OTHER")
	}
}

// TestUnsampledParentNotExported: parent-based sampling keeps a
// producer's "not sampled" decision even at ratio 1.
func TestUnsampledParentNotExported(t *testing.T) {
	col := otlptest.Start()
	defer col.Close()
	tr, err := New(Config{Endpoint: col.URL(), SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr.Record(&Span{Op: "send", Start: time.Now(), Parent: ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "")})
	tr.Record(&Span{Op: "marker", Start: time.Now()})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range col.Spans() {
		if s.Name == "send" {
			t.Fatalf("an unsampled parent's child was exported: %+v", s)
		}
	}
	if len(col.Spans()) != 1 {
		t.Fatalf("want only the marker span, got %+v", col.Spans())
	}
}

// TestExportErrorsLoggedOnce: a collector that refuses every export is
// one warning in the server's log per interval, not one line per batch on
// stderr.
func TestExportErrorsLoggedOnce(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	l := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	e := newErrorLog(l)
	for range 5 {
		e.Handle(errors.New("connection refused"))
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if n := strings.Count(out, "spans not exported"); n != 1 || !strings.Contains(out, "connection refused") {
		t.Fatalf("want one warning, got %d: %s", n, out)
	}
	if e.dropped.Load() != 4 {
		t.Fatalf("dropped %d, want 4", e.dropped.Load())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
