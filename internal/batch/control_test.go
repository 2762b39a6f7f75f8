package batch

import "testing"

func TestMarkerRoundTrip(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b, err := BuildMarker(42, 3, commit, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := ParseHeader(b)
		if !h.Control() || !h.Transactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != -1 {
			t.Fatalf("header %+v", h)
		}
		if got, err := ParseMarker(b); err != nil || got != commit {
			t.Fatalf("commit=%v: parsed %v %v", commit, got, err)
		}
	}
	for _, key := range [][]byte{nil, {0, 0, 0}, {0, 1, 0, 1}, {0, 0, 0, 5}} {
		if _, err := ParseControlKey(key); err == nil {
			t.Errorf("key %x accepted", key)
		}
	}
}

// FuzzParseMarker: any bytes give a marker or an error, never a panic.
func FuzzParseMarker(f *testing.F) {
	b, _ := BuildMarker(1, 0, true, 0, 0)
	f.Add(b)
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseMarker(data)
		_, _ = ParseControlKey(data)
	})
}
