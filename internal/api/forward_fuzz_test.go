package api

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http/httptest"
	"testing"
)

// chunks reads b in pieces of at most n bytes, as a network read would.
type chunks struct {
	b []byte
	n int
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

// FuzzCopyEnvelopes: whatever a leader's answer holds, copyEnvelopes passes on exactly its
// longest prefix of whole envelopes, in order, whatever the read sizes, never panics, and
// says the answer ended only if an end-of-stream envelope was among them; an envelope
// declared larger than 64 MiB is an error at once, not a wait for it.
func FuzzCopyEnvelopes(f *testing.F) {
	env := func(flags byte, body string) []byte {
		b := []byte{flags, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], uint32(len(body)))
		return append(b, body...)
	}
	f.Add(append(env(0, "hello"), env(flagConnectEnd, "{}")...), uint8(3), uint8(wireConnect))
	f.Add(append(env(0, "a"), env(flagGRPCWebEnd, "grpc-status: 0\r\n")...), uint8(1), uint8(wireGRPCWeb))
	f.Add(append(env(0, "abc"), 0, 0, 0), uint8(7), uint8(wireGRPC))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 1}, uint8(2), uint8(wireConnect))
	f.Fuzz(func(t *testing.T, in []byte, step, kind uint8) {
		p := wire(kind%3) + wireConnect
		w := httptest.NewRecorder()
		ended, err := copyEnvelopes(w, &chunks{b: in, n: int(step%64) + 1}, p)
		// The longest prefix of whole envelopes, and whether it holds an end.
		whole, wantEnded := 0, false
		for len(in)-whole >= 5 {
			size := int(binary.BigEndian.Uint32(in[whole+1 : whole+5]))
			if size > maxForwardedAnswer || len(in)-whole-5 < size {
				break
			}
			flags := in[whole]
			whole += 5 + size
			wantEnded = wantEnded || (p == wireConnect && flags&flagConnectEnd != 0) || (p == wireGRPCWeb && flags&flagGRPCWebEnd != 0)
		}
		if got := w.Body.Bytes(); !bytes.Equal(got, in[:whole]) {
			t.Fatalf("passed on %d bytes, want the %d of whole envelopes", len(got), whole)
		}
		if ended != wantEnded {
			t.Fatalf("ended = %v, want %v", ended, wantEnded)
		}
		if (err == nil) != (whole == len(in)) {
			t.Fatalf("err = %v with %d of %d bytes whole", err, whole, len(in))
		}
		endUnavailable(w, p, "cut") // the ending written after a cut never panics either
	})
}
