package broker

import (
	"strconv"
	"testing"
)

// TestEncodeHeadersRoundTrip: the values cut from one buffer and the cached
// keys decode to the message they came from, and appending to one value
// cannot overwrite the next.
func TestEncodeHeadersRoundTrip(t *testing.T) {
	m := &Message{ID: "id-1", GroupID: "g", DedupID: "d",
		Attributes: map[string]Attribute{"color": {DataType: "String", Value: []byte("red")}, "n": {DataType: "Number", Value: []byte("7")}},
		System:     map[string]string{"SenderId": "AKID", "AWSTraceHeader": "Root=1"}}
	for range 2 { // the second pass takes the keys from the cache
		hs := encodeHeaders(m)
		for _, h := range hs {
			_ = append(h.Value, "overwrite"...)
		}
		var got Message
		decodeHeaders(&got, hs, m.SentAt)
		if got.ID != m.ID || got.GroupID != m.GroupID || got.DedupID != m.DedupID ||
			string(got.Attributes["color"].Value) != "red" || got.Attributes["n"].DataType != "Number" ||
			got.System["SenderId"] != "AKID" || got.System["AWSTraceHeader"] != "Root=1" {
			t.Fatalf("decoded %+v from %+v", got, hs)
		}
	}
}

// TestHeaderKeysBounded: past maxCachedKeys names a key is still right,
// and the cache stops growing.
func TestHeaderKeysBounded(t *testing.T) {
	var c keyCache
	for i := range maxCachedKeys + 10 {
		name := "n" + strconv.Itoa(i)
		if k := c.key(prefixAttr, name); k != prefixAttr+name {
			t.Fatalf("key %q for %q", k, name)
		}
	}
	if n := len(*c.m.Load()); n != maxCachedKeys {
		t.Fatalf("cache holds %d keys, want %d", n, maxCachedKeys)
	}
	long := string(make([]byte, maxCachedNameLen+1))
	if k := c.key(prefixSystem, long); k != prefixSystem+long {
		t.Fatal("a long name's key is wrong")
	}
}

func BenchmarkEncodeHeaders(b *testing.B) {
	m := &Message{ID: newMessageID(), System: map[string]string{"SenderId": "000000000000"}}
	b.ReportAllocs()
	for b.Loop() {
		_ = encodeHeaders(m)
	}
}
