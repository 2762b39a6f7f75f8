package wire

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errBad = errors.New("bad")

func TestDecoder(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = binary.AppendVarint(b, -7)
	d := Decoder{B: b, Bad: errBad}
	if got := string(d.Bytes(3)); got != "abc" {
		t.Fatalf("Bytes: %q", got)
	}
	if got := d.Int32(); got != -7 {
		t.Fatalf("Int32: %d", got)
	}
	d.Done()
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		read func(*Decoder)
	}{
		{"length past the limit", binary.AppendUvarint(nil, 4), func(d *Decoder) { d.Bytes(3) }},
		{"length past the input", append(binary.AppendUvarint(nil, 5), "ab"...), func(d *Decoder) { d.Bytes(10) }},
		{"int32 out of range", binary.AppendVarint(nil, 1<<40), func(d *Decoder) { d.Int32() }},
		{"empty uvarint", nil, func(d *Decoder) { d.Uvarint() }},
		{"trailing bytes", []byte{1}, func(d *Decoder) { d.Done() }},
	} {
		d := Decoder{B: tc.in, Bad: errBad}
		tc.read(&d)
		if !errors.Is(d.Err, errBad) {
			t.Errorf("%s: %v, want an error wrapping the sentinel", tc.name, d.Err)
		}
		if d.Uvarint() != 0 || d.Bytes(10) != nil {
			t.Errorf("%s: a read after a failure returned something", tc.name)
		}
	}
}
