package telemetry

import (
	"strings"
	"testing"
)

const (
	tpSampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tidHex    = "4bf92f3577b34da6a3ce929d0e0e4736"
	sidHex    = "00f067aa0ba902b7"
)

func TestParseTraceparent(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		valid    bool
		sampled  bool
	}{
		{"sampled", tpSampled, true, true},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, false},
		{"future version, longer", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true, true},
		{"future version, longer without dash", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false, false},
		{"version 00 longer", tpSampled + "-x", false, false},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false},
		{"uppercase", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", false, false},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false},
		{"zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, false},
		{"short", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", false, false},
		{"garbage", "not a traceparent at all, but long enough to be looked at", false, false},
		{"empty", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := ParseTraceparent(tc.in, "")
			if sc.IsValid() != tc.valid || sc.IsSampled() != tc.sampled {
				t.Fatalf("valid %v sampled %v, want %v %v", sc.IsValid(), sc.IsSampled(), tc.valid, tc.sampled)
			}
			if tc.valid && (sc.TraceID().String() != tidHex || sc.SpanID().String() != sidHex || !sc.IsRemote()) {
				t.Fatalf("got %v %v remote %v", sc.TraceID(), sc.SpanID(), sc.IsRemote())
			}
		})
	}
}

func TestTracestateKeptOrDropped(t *testing.T) {
	sc := ParseTraceparent(tpSampled, "vendor=abc,other=1")
	if tp, ts := FormatTraceparent(sc); tp != tpSampled || ts != "vendor=abc,other=1" {
		t.Fatalf("round trip: %q %q", tp, ts)
	}
	sc = ParseTraceparent(tpSampled, "not a valid = tracestate,,,=")
	if !sc.IsValid() || sc.TraceState().Len() != 0 {
		t.Fatalf("a malformed tracestate must be dropped, the traceparent kept: %v %q", sc.IsValid(), sc.TraceState())
	}
}

func TestXRay(t *testing.T) {
	const xr = "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1"
	for _, tc := range []struct {
		name, in string
		valid    bool
		sampled  bool
	}{
		{"canonical", xr, true, true},
		{"other order, lineage", "Sampled=0;Lineage=a87bd80c:1|68fd508a:5;Parent=00f067aa0ba902b7;Root=1-4bf92f35-77b34da6a3ce929d0e0e4736", true, false},
		{"uppercase", "Root=1-4BF92F35-77B34DA6A3CE929D0E0E4736;Parent=00F067AA0BA902B7;Sampled=1", true, true},
		{"no parent", "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Sampled=1", false, false},
		{"bad root version", "Root=2-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7", false, false},
		{"bad hex", "Root=1-4bf92f35-77b34da6a3ce929d0e0e47zz;Parent=00f067aa0ba902b7", false, false},
		{"empty", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := ParseXRay(tc.in)
			if sc.IsValid() != tc.valid || sc.IsSampled() != tc.sampled {
				t.Fatalf("valid %v sampled %v, want %v %v", sc.IsValid(), sc.IsSampled(), tc.valid, tc.sampled)
			}
			if tc.valid && (sc.TraceID().String() != tidHex || sc.SpanID().String() != sidHex) {
				t.Fatalf("got %v %v", sc.TraceID(), sc.SpanID())
			}
		})
	}
	if got := FormatXRay(ParseTraceparent(tpSampled, "")); got != xr {
		t.Fatalf("W3C to X-Ray: %q, want %q", got, xr)
	}
	if tp, _ := FormatTraceparent(ParseXRay(xr)); tp != tpSampled {
		t.Fatalf("X-Ray to W3C: %q, want %q", tp, tpSampled)
	}
}

func TestMessageContextPrefersTraceparent(t *testing.T) {
	other := "Root=1-11111111-111111111111111111111111;Parent=2222222222222222;Sampled=1"
	if sc := MessageContext(tpSampled, "", other); sc.TraceID().String() != tidHex {
		t.Fatalf("traceparent must win: %v", sc.TraceID())
	}
	if sc := MessageContext("garbage", "", other); !strings.HasPrefix(sc.TraceID().String(), "1111") {
		t.Fatalf("a malformed traceparent falls back to the X-Ray header: %v", sc.TraceID())
	}
	if sc := MessageContext("", "", ""); sc.IsValid() {
		t.Fatal("nothing: invalid")
	}
}

// FuzzParseTraceparent: no input panics, and what parses formats back to
// the canonical form of the same ids.
func FuzzParseTraceparent(f *testing.F) {
	f.Add(tpSampled, "a=b")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, tp, ts string) {
		sc := ParseTraceparent(tp, ts)
		if !sc.IsValid() {
			return
		}
		out, _ := FormatTraceparent(sc)
		again := ParseTraceparent(out, "")
		if again.TraceID() != sc.TraceID() || again.SpanID() != sc.SpanID() || again.IsSampled() != sc.IsSampled() {
			t.Fatalf("%q -> %q does not round-trip", tp, out)
		}
		if out[3:52] != tp[3:52] {
			t.Fatalf("%q -> %q changed the ids", tp, out)
		}
	})
}

// FuzzParseXRay: no input panics, and what parses round-trips through
// FormatXRay.
func FuzzParseXRay(f *testing.F) {
	f.Add("Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1")
	f.Add("Root=;Parent=;;;=")
	f.Fuzz(func(t *testing.T, h string) {
		sc := ParseXRay(h)
		if !sc.IsValid() {
			return
		}
		again := ParseXRay(FormatXRay(sc))
		if again.TraceID() != sc.TraceID() || again.SpanID() != sc.SpanID() || again.IsSampled() != sc.IsSampled() {
			t.Fatalf("%q does not round-trip", h)
		}
	})
}
