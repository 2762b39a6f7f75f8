package telemetry

import (
	"encoding/hex"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// The names a message's trace context goes by: W3C Trace Context's header
// names, which the OpenTelemetry Kafka and SQS instrumentations also use
// for record headers and message attributes.
const (
	Traceparent = "traceparent"
	Tracestate  = "tracestate"
	// XRayHeader is the HTTP header X-Ray uses for what SQS carries as the
	// AWSTraceHeader system attribute.
	XRayHeader = "X-Amzn-Trace-Id"
)

// ParseTraceparent reads a W3C traceparent (and its tracestate, which is
// dropped if malformed). Anything malformed gives an invalid SpanContext:
// a bad header is ignored, never an error and never passed on.
func ParseTraceparent(tp, ts string) trace.SpanContext {
	// version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2 = 55.
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}
	}
	ver, ok := hexByte(tp[0:2])
	if !ok || ver == 0xff || (ver == 0 && len(tp) != 55) || (len(tp) > 55 && tp[55] != '-') {
		return trace.SpanContext{}
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if !lowerHex(tp[3:35]) || !lowerHex(tp[36:52]) {
		return trace.SpanContext{}
	}
	_, _ = hex.Decode(tid[:], []byte(tp[3:35]))
	_, _ = hex.Decode(sid[:], []byte(tp[36:52]))
	flags, ok := hexByte(tp[53:55])
	if !ok || !tid.IsValid() || !sid.IsValid() {
		return trace.SpanContext{}
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags) & trace.FlagsSampled, Remote: true}
	if ts != "" {
		if state, err := trace.ParseTraceState(ts); err == nil {
			cfg.TraceState = state
		}
	}
	return trace.NewSpanContext(cfg)
}

// FormatTraceparent writes sc as a version-00 traceparent and its
// tracestate ("" when it has none); "" for an invalid sc.
func FormatTraceparent(sc trace.SpanContext) (tp, ts string) {
	if !sc.IsValid() {
		return "", ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	return "00-" + hex.EncodeToString(tid[:]) + "-" + hex.EncodeToString(sid[:]) + "-" + hex.EncodeToString([]byte{byte(sc.TraceFlags())}),
		sc.TraceState().String()
}

// ParseXRay reads an X-Ray trace header as SQS's AWSTraceHeader carries it:
// "Root=1-<8 hex epoch>-<24 hex>;Parent=<16 hex>;Sampled=<0|1>", fields in
// any order, others (Lineage, Self) ignored. The X-Ray trace id's 8+24 hex
// digits are the W3C trace id's 32, Parent is the span id, Sampled=1 the
// sampled flag: the mapping OpenTelemetry's X-Ray propagator uses. A
// header without a Root or a Parent, or with a malformed one, gives an
// invalid SpanContext.
func ParseXRay(h string) trace.SpanContext {
	var root, parent, sampled string
	for h != "" {
		var field string
		field, h, _ = strings.Cut(h, ";")
		k, v, _ := strings.Cut(strings.TrimSpace(field), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			sampled = v
		}
	}
	// "1-" 8 hex "-" 24 hex
	if len(root) != 35 || root[0:2] != "1-" || root[10] != '-' || len(parent) != 16 {
		return trace.SpanContext{}
	}
	tidHex := root[2:10] + root[11:]
	if !anyHex(tidHex) || !anyHex(parent) {
		return trace.SpanContext{}
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = hex.Decode(tid[:], []byte(strings.ToLower(tidHex)))
	_, _ = hex.Decode(sid[:], []byte(strings.ToLower(parent)))
	if !tid.IsValid() || !sid.IsValid() {
		return trace.SpanContext{}
	}
	var flags trace.TraceFlags
	if sampled == "1" {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
}

// FormatXRay writes sc as an X-Ray trace header; "" for an invalid sc.
func FormatXRay(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	t := hex.EncodeToString(tid[:])
	s := "0"
	if sc.IsSampled() {
		s = "1"
	}
	return "Root=1-" + t[:8] + "-" + t[8:] + ";Parent=" + hex.EncodeToString(sid[:]) + ";Sampled=" + s
}

// MessageContext is the trace context a message carries: its traceparent
// (with tracestate) if valid, else its X-Ray header. Either may be "".
func MessageContext(traceparent, tracestate, xray string) trace.SpanContext {
	if traceparent != "" {
		if sc := ParseTraceparent(traceparent, tracestate); sc.IsValid() {
			return sc
		}
	}
	if xray != "" {
		return ParseXRay(xray)
	}
	return trace.SpanContext{}
}

func hexByte(s string) (byte, bool) {
	if !lowerHex(s) {
		return 0, false
	}
	var b [1]byte
	_, _ = hex.Decode(b[:], []byte(s))
	return b[0], true
}

// lowerHex: W3C Trace Context allows lowercase hex digits only.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// anyHex: X-Ray ids are case-insensitive.
func anyHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}
