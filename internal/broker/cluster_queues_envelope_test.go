package broker

import (
	"bytes"
	"reflect"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	cases := []struct {
		attrs map[string]Attribute
		sys   map[string]string
		body  []byte
	}{
		{nil, nil, []byte("plain")},
		{nil, nil, nil},
		{map[string]Attribute{"n": {DataType: "Number", Value: []byte("1")}, "b": {DataType: "Binary", Value: []byte{0, 1}}},
			map[string]string{"AWSTraceHeader": "Root=1"}, []byte("with")},
	}
	for _, tc := range cases {
		a, s, b, err := decodeEnvelope(encodeEnvelope(tc.attrs, tc.sys, tc.body))
		if err != nil || !reflect.DeepEqual(a, tc.attrs) || !reflect.DeepEqual(s, tc.sys) || !bytes.Equal(b, tc.body) {
			t.Errorf("%+v: got %v %v %q %v", tc, a, s, b, err)
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1}, {1, 5, 0}, {1, 1, 3, 'a'}} {
		if _, _, _, err := decodeEnvelope(bad); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}

// FuzzDecodeEnvelope: no input panics the decoder, and what it accepts encodes back to
// the same envelope.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(encodeEnvelope(map[string]Attribute{"k": {DataType: "String", Value: []byte("v")}}, map[string]string{"s": "t"}, []byte("body")))
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, s, body, err := decodeEnvelope(b)
		if err != nil {
			return
		}
		a2, s2, body2, err := decodeEnvelope(encodeEnvelope(a, s, body))
		if err != nil || !reflect.DeepEqual(a, a2) || !reflect.DeepEqual(s, s2) || !bytes.Equal(body, body2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
