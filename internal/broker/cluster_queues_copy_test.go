package broker

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestCopyHeader: a dead-letter copy's header round-trips in both versions — version 2
// (id, source, count), which a cluster below LevelDeadLetterHistory writes and every build
// reads, and version 3 with the history — a copy of a copy replaces the header, a long
// nack reason is cut at a character boundary so the header stays within copyReserve, and a
// body that is no copy reads as one without a header.
func TestCopyHeader(t *testing.T) {
	env := encodeEnvelope(nil, map[string]string{"k": "v"}, []byte("body"))
	at := func(s int) time.Time { return time.UnixMilli(1_700_000_000_000 + int64(s)*1000) }
	for _, c := range []struct {
		name    string
		in      copyHeader
		version byte
		want    copyHeader
	}{
		{"v2", copyHeader{id: "id-1", source: "src", count: 3}, 2, copyHeader{id: "id-1", source: "src", count: 3}},
		{"v2 ignores the history fields", copyHeader{id: "id-1", source: "src", count: 3, sentAt: at(1), reason: "r"}, 2,
			copyHeader{id: "id-1", source: "src", count: 3}},
		{"v3", copyHeader{id: "id-1", source: "src", count: 3, history: true, sentAt: at(1), firstAt: at(2), lastAt: at(3), reason: "boom"}, 3,
			copyHeader{id: "id-1", source: "src", count: 3, history: true, sentAt: at(1), firstAt: at(2), lastAt: at(3), reason: "boom"}},
		{"v3, history unknown", copyHeader{id: "id-1", source: "src", count: 1, history: true}, 3,
			copyHeader{id: "id-1", source: "src", count: 1, history: true}},
		{"a redriven copy", copyHeader{id: "id-2"}, 2, copyHeader{id: "id-2"}},
	} {
		b := wrapCopy(c.in, env)
		if b[0] != c.version {
			t.Errorf("%s: version %d, want %d", c.name, b[0], c.version)
		}
		got, inner, err := unwrapCopy(b)
		if err != nil || got != c.want || !bytes.Equal(inner, env) {
			t.Errorf("%s: %+v %v (envelope kept: %v), want %+v", c.name, got, err, bytes.Equal(inner, env), c.want)
		}
		// A copy of the copy replaces the header.
		again := wrapCopy(copyHeader{id: "id-3", source: "dlq", count: 1, history: true, sentAt: at(9)}, b)
		if h, inner, err := unwrapCopy(again); err != nil || h.id != "id-3" || !h.sentAt.Equal(at(9)) || !bytes.Equal(inner, env) {
			t.Errorf("%s: a copy of the copy: %+v %v", c.name, h, err)
		}
	}
	// The longest header: a 36-byte id, an 80-byte queue name, a 1 KiB reason.
	long := copyHeader{id: strings.Repeat("i", 36), source: strings.Repeat("q", 80), count: 1 << 30, history: true,
		sentAt: at(1), firstAt: at(2), lastAt: at(3), reason: strings.Repeat("é", 512)}
	b := wrapCopy(long, env)
	if n := len(b) - len(env); n > copyReserve {
		t.Errorf("the longest header is %d bytes, over copyReserve %d", n, copyReserve)
	}
	h, _, err := unwrapCopy(b)
	if err != nil || len(h.reason) > copyReasonMax || !utf8.ValidString(h.reason) || !strings.HasPrefix(long.reason, h.reason) {
		t.Errorf("a long reason came back as %q (%v)", h.reason, err)
	}
	if h, inner, err := unwrapCopy(env); err != nil || h != (copyHeader{}) || !bytes.Equal(inner, env) {
		t.Errorf("no copy: %+v %v", h, err)
	}
	for _, bad := range [][]byte{{3}, {3, 1, 'a', 0, 1, 0, 0, 0, 0}, {2, 9}, append([]byte{3, 0, 0, 0, 0, 0, 0, 100}, env...)} {
		if _, _, err := unwrapCopy(bad); err == nil {
			t.Errorf("%x unwrapped", bad)
		}
	}
}

// FuzzUnwrapCopy: no input panics the copy header's decoder, and a header it accepts
// wraps back to one that decodes the same.
func FuzzUnwrapCopy(f *testing.F) {
	env := encodeEnvelope(nil, nil, []byte("b"))
	f.Add(wrapCopy(copyHeader{id: "x", source: "q", count: 2}, env))
	f.Add(wrapCopy(copyHeader{id: "x", source: "q", count: 2, history: true, sentAt: time.UnixMilli(5), reason: "r"}, env))
	f.Add(env)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, inner, err := unwrapCopy(b)
		if err != nil || len(b) == 0 || (b[0] != copyVersion && b[0] != copyVersionHistory) || len(h.reason) > copyReasonMax || !utf8.ValidString(h.reason) {
			return // not a copy (its envelope is checked elsewhere), or a reason a wrap would cut
		}
		h2, inner2, err := unwrapCopy(wrapCopy(h, inner))
		if err != nil || h2 != h || !bytes.Equal(inner, inner2) {
			t.Fatalf("round trip of %+v: %+v %v", h, h2, err)
		}
	})
}
