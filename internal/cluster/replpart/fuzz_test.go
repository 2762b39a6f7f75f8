package replpart

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode: no input panics the decoder or makes it allocate past its input; what it
// accepts has at least one non-empty batch and encodes to an entry that decodes the same
// (not always to the same bytes: a uvarint may be written with redundant bytes).
func FuzzDecode(f *testing.F) {
	f.Add((&Entry{Origin: 1, Request: 2, Batches: [][]byte{[]byte("batch")}}).Encode(nil))
	f.Add((&Entry{Origin: 1 << 40, Request: 1 << 62, Batches: [][]byte{{0}, bytes.Repeat([]byte{7}, 300), []byte("x")}}).Encode(nil))
	f.Add([]byte{})
	f.Add([]byte{entryVersion, 0, 0, 0})
	f.Add([]byte{entryVersion, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("refusal %v is not ErrBadEntry", err)
			}
			return
		}
		if len(e.Batches) == 0 {
			t.Fatal("accepted an entry with no batch")
		}
		for i, x := range e.Batches {
			if len(x) == 0 {
				t.Fatalf("accepted an empty batch %d", i)
			}
		}
		enc := e.Encode(nil)
		if len(enc) != e.Size() {
			t.Fatalf("Size says %d bytes, Encode wrote %d", e.Size(), len(enc))
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoding of an accepted entry refused: %v", err)
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip changed the entry:\n%+v\n%+v", e, again)
		}
	})
}

// FuzzPullRequest: no input panics the pull request decoder; what it accepts is a
// non-empty range with a bounded max, and re-encodes to the same request.
func FuzzPullRequest(f *testing.F) {
	f.Add(pullRequest{From: 0, To: 1, Max: 1}.encode())
	f.Add(pullRequest{From: 1 << 40, To: 1<<62 + 5, Max: MaxPullChunk}.encode())
	f.Add([]byte{pullVersion, pullKind, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodePullRequest(b)
		if err != nil {
			if !errors.Is(err, ErrBadPull) {
				t.Fatalf("refusal %v is not ErrBadPull", err)
			}
			return
		}
		if r.From < 0 || r.From >= r.To || r.Max <= 0 || r.Max > MaxPullChunk {
			t.Fatalf("accepted %+v", r)
		}
		if again, err := decodePullRequest(r.encode()); err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}

// FuzzPullResponse: no input panics the pull response decoder; what it accepts has its
// offsets in order, data exactly when it names records, and re-encodes to the same range;
// checkRange never panics on it either.
func FuzzPullResponse(f *testing.F) {
	f.Add(Range{Start: 3, Next: 9, Data: []byte("records")}.encode(), int64(3), int64(10))
	f.Add(Range{Start: 50, Next: 50}.encode(), int64(0), int64(100))
	f.Add([]byte{pullVersion, 5, 1}, int64(0), int64(1))
	f.Fuzz(func(t *testing.T, b []byte, from, to int64) {
		r, err := decodeRange(b)
		if err != nil {
			if !errors.Is(err, ErrBadPull) {
				t.Fatalf("refusal %v is not ErrBadPull", err)
			}
			return
		}
		if r.Start < 0 || r.Next < r.Start || (r.Next > r.Start) != (len(r.Data) > 0) {
			t.Fatalf("accepted %+v", r)
		}
		again, err := decodeRange(r.encode())
		if err != nil || again.Start != r.Start || again.Next != r.Next || !bytes.Equal(again.Data, r.Data) {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
		if err := checkRange(pullRequest{From: from, To: to, Max: 1}, r); err == nil && (r.Start < from || r.Next > to || r.Next <= from) {
			t.Fatalf("checkRange accepted %+v for %d..%d", r, from, to)
		}
	})
}

// FuzzDecodeForget: no input panics the forget entry's decoder or makes it allocate past
// its input; what it accepts is a bounded, non-empty list of valid producers that
// re-encodes to an entry decoding the same.
func FuzzDecodeForget(f *testing.F) {
	f.Add(encodeForget(nil, []IdleProducer{{ID: 1, LastBase: 0}}))
	f.Add(encodeForget(nil, []IdleProducer{{ID: 1 << 50, LastBase: -1}, {ID: 7, LastBase: 1 << 40}}))
	f.Add([]byte{forgetVersion})
	f.Add([]byte{forgetVersion, 0})
	f.Add([]byte{forgetVersion, 0xff, 0xff, 0xff, 0xff, 0x0f, 2, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return // Apply dispatches on the first byte
		}
		ps, err := decodeForget(b)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("refusal %v is not ErrBadEntry", err)
			}
			return
		}
		if len(ps) == 0 || len(ps) > MaxForgetProducers {
			t.Fatalf("accepted %d producers", len(ps))
		}
		for _, p := range ps {
			if p.ID < 0 || p.LastBase < -1 {
				t.Fatalf("accepted %+v", p)
			}
		}
		again, err := decodeForget(encodeForget(nil, ps))
		if err != nil || !reflect.DeepEqual(again, ps) {
			t.Fatalf("round trip: %+v %v, want %+v", again, err, ps)
		}
	})
}
