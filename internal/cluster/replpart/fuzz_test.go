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
		again, err := Decode(e.Encode(nil))
		if err != nil {
			t.Fatalf("re-encoding of an accepted entry refused: %v", err)
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip changed the entry:\n%+v\n%+v", e, again)
		}
	})
}
