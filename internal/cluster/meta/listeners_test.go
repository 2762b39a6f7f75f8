package meta

import (
	"strings"
	"testing"
)

// TestListenersEncoding: a node's TLS listeners come back as they were set, empty ones
// included; a truncated answer, trailing bytes or an address over MaxAddr are refused.
func TestListenersEncoding(t *testing.T) {
	for _, l := range []Listeners{{}, {KafkaTLS: "k:9093"}, {KafkaTLS: "k:9093", HTTPTLS: "h:8443", SQSTLS: "s:9325"}} {
		got, err := DecodeListeners(l.encode())
		if err != nil || got != l {
			t.Errorf("%+v: decoded %+v, %v", l, got, err)
		}
	}
	full := Listeners{KafkaTLS: "k:9093", HTTPTLS: "h:8443", SQSTLS: "s:9325"}.encode()
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": full[:len(full)-1],
		"trailing":  append(full[:len(full):len(full)], 0),
		"too long":  Listeners{KafkaTLS: strings.Repeat("a", MaxAddr+1)}.encode(),
	} {
		if l, err := DecodeListeners(b); err == nil {
			t.Errorf("%s: decoded %+v", name, l)
		}
	}
}

// FuzzDecodeListeners: whatever a peer answers, decoding it fails or gives listeners
// that encode and decode back to themselves (a length may come non-minimal on the wire).
func FuzzDecodeListeners(f *testing.F) {
	f.Add(Listeners{KafkaTLS: "k:9093", HTTPTLS: "h:8443", SQSTLS: "s:9325"}.encode())
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeListeners(b)
		if err != nil {
			return
		}
		if again, err := DecodeListeners(l.encode()); err != nil || again != l {
			t.Fatalf("%x decoded to %+v, which comes back as %+v, %v", b, l, again, err)
		}
	})
}
