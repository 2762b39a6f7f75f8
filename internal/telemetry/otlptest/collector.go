// Package otlptest is an in-process OTLP/HTTP trace collector for tests:
// it decodes the protobuf export requests an OTLP exporter posts to
// /v1/traces and keeps their spans, so a test can check what sluice
// exported over the wire, as a real collector would receive it.
//
// It must never be linked into sluice serve (deps_test.go checks).
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, ids in hex.
type Span struct {
	Name, TraceID, SpanID, ParentID string
	Kind                            int32
	Links                           []Link
	Attrs                           map[string]string // every value as its string form
	Status                          int32             // 0 unset, 1 ok, 2 error
	Service                         string
}

// Link is a span link, ids in hex.
type Link struct{ TraceID, SpanID string }

// Collector is a running OTLP/HTTP receiver.
type Collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []Span
	reqs  int
}

// Start listens on 127.0.0.1; Close stops it.
func Start() *Collector {
	c := &Collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

// URL is the endpoint to give the exporter (with /v1/traces).
func (c *Collector) URL() string { return c.srv.URL + "/v1/traces" }

// Close stops the collector.
func (c *Collector) Close() { c.srv.Close() }

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.add(&req)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *Collector) add(req *coltrace.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs++
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Kind: int32(s.GetKind()), Attrs: attrs(s.GetAttributes()),
					Status: int32(s.GetStatus().GetCode()), Service: service}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
				}
				c.spans = append(c.spans, sp)
			}
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		default:
			m[kv.GetKey()] = anyString(v)
		}
	}
	return m
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	default:
		return v.String()
	}
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Requests is how many export requests arrived.
func (c *Collector) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reqs
}

// Find returns the first span for which match is true, waiting up to
// timeout for it to arrive (exporters batch).
func (c *Collector) Find(timeout time.Duration, match func(Span) bool) (Span, bool) {
	deadline := time.Now().Add(timeout)
	for {
		for _, s := range c.Spans() {
			if match(s) {
				return s, true
			}
		}
		if time.Now().After(deadline) {
			return Span{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
