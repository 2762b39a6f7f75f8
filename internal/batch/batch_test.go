package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func sample(t testing.TB) []Record {
	return []Record{
		{Timestamp: 1000, Key: []byte("k1"), Value: []byte("hello")},
		{Timestamp: 998, Key: nil, Value: []byte{}},
		{Timestamp: 1005, Key: []byte(""), Value: nil, Headers: []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "n", Value: nil}}},
	}
}

func TestBuildRoundTrip(t *testing.T) {
	recs := sample(t)
	b, err := Build(recs, Options{BaseOffset: 40, LeaderEpoch: 7, Producer: &Producer{ID: 9, Epoch: 2, BaseSequence: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(b, 0); err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{BaseOffset: 40, BatchLength: int32(len(b) - 12), PartitionLeaderEpoch: 7, Magic: 2, CRC: h.CRC,
		LastOffsetDelta: 2, BaseTimestamp: 1000, MaxTimestamp: 1005, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 5, RecordCount: 3}
	if h != want {
		t.Fatalf("header %+v\nwant   %+v", h, want)
	}
	i := 0
	for r, err := range Records(b) {
		if err != nil {
			t.Fatal(err)
		}
		w := recs[i]
		if r.Offset != 40+int64(i) || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) ||
			!bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %+v, want %+v", i, r, w)
		}
		for j := range r.Headers {
			if r.Headers[j].Key != w.Headers[j].Key || (r.Headers[j].Value == nil) != (w.Headers[j].Value == nil) {
				t.Fatalf("record %d header %d: %+v", i, j, r.Headers[j])
			}
		}
		i++
	}
	if i != len(recs) {
		t.Fatalf("%d records", i)
	}
}

func TestSetFieldsKeepCRC(t *testing.T) {
	b, _ := Build(sample(t), Options{})
	SetBaseOffset(b, 1<<40)
	SetLeaderEpoch(b, 99)
	if err := Validate(b, 0); err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHeader(b)
	if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 99 {
		t.Fatalf("%+v", h)
	}
}

func TestValidateErrors(t *testing.T) {
	good := func() []byte { b, _ := Build(sample(t), Options{}); return b }
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
		max  int
		want error
	}{
		{"ok", func(b []byte) []byte { return b }, 0, nil},
		{"nil", func([]byte) []byte { return nil }, 0, ErrCorrupt},
		{"short-header", func(b []byte) []byte { return b[:60] }, 0, ErrCorrupt},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, 0, ErrCorrupt},
		{"extra-byte", func(b []byte) []byte { return append(b, 0) }, 0, ErrCorrupt},
		{"magic", func(b []byte) []byte { b[16] = 1; return b }, 0, ErrBadMagic},
		{"crc", func(b []byte) []byte { b[17] ^= 0xff; return b }, 0, ErrCorrupt},
		{"payload-bit", func(b []byte) []byte { b[70] ^= 1; return b }, 0, ErrCorrupt},
		{"too-large", func(b []byte) []byte { return b }, 20, ErrTooLarge},
		{"count-vs-delta", func(b []byte) []byte { b[60] = 9; fixCRC(b); return b }, 0, ErrCorrupt},
		{"negative-delta", func(b []byte) []byte { b[23] = 0x80; fixCRC(b); return b }, 0, ErrCorrupt},
		{"bad-record", func(b []byte) []byte { b[61] = 0x7f; fixCRC(b); return b }, 0, ErrCorrupt},
		{"unknown-codec", func(b []byte) []byte { b[22] |= 7; fixCRC(b); return b }, 0, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.mut(good()), tc.max)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var be *Error
			if err != nil && !errors.As(err, &be) {
				t.Fatalf("%T is not *Error", err)
			}
		})
	}
}

func fixCRC(b []byte) {
	c := ComputeCRC(b)
	b[17], b[18], b[19], b[20] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
}

func TestBuildEmpty(t *testing.T) {
	if _, err := Build(nil, Options{}); !errors.Is(err, ErrNoRecords) {
		t.Fatal(err)
	}
}

// TestAppendBuild: AppendBuild appends exactly Build's batch behind what dst held, and every
// record's precomputed length prefix is the length of the body that follows it (nil and
// empty keys and values, headers, timestamps before and after the first, large deltas).
func TestAppendBuild(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 300)
	recs := []Record{
		{Timestamp: 1_700_000_000_000, Key: nil, Value: []byte("v")},
		{Timestamp: 1_600_000_000_000, Key: []byte{}, Value: nil},
		{Timestamp: 1_800_000_000_000, Key: big, Value: big, Headers: []RecordHeader{{Key: "h", Value: nil}, {Key: string(big), Value: big}}},
	}
	for n := 1; n <= len(recs); n++ {
		opts := Options{BaseOffset: 42, LeaderEpoch: 3, Producer: &Producer{ID: 9, Epoch: 1, BaseSequence: 5}}
		want, err := Build(recs[:n], opts)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("prefix")
		got, err := AppendBuild(append([]byte(nil), prefix...), recs[:n], opts)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("%d records: AppendBuild differs from Build", n)
		}
		if err := Validate(want, 0); err != nil {
			t.Fatalf("%d records: %v", n, err)
		}
		i := 0
		for r, err := range Records(want) {
			if err != nil {
				t.Fatalf("%d records: record %d: %v", n, i, err)
			}
			if !bytes.Equal(r.Key, recs[i].Key) || (r.Key == nil) != (recs[i].Key == nil) || !bytes.Equal(r.Value, recs[i].Value) {
				t.Fatalf("%d records: record %d read back differs", n, i)
			}
			i++
		}
		if i != n {
			t.Fatalf("read %d records, want %d", i, n)
		}
	}
	for _, x := range []int64{0, 1, -1, 63, 64, -64, -65, 1 << 40, -(1 << 40), 1<<63 - 1, -1 << 63} {
		if got, want := varintLen(x), len(binary.AppendVarint(nil, x)); got != want {
			t.Errorf("varintLen(%d) = %d, want %d", x, got, want)
		}
	}
}

// TestFillers: the empty batches that fill a cleaned log's gap validate, hold no record,
// cover exactly [from, to) end to end, and split a gap wider than an int32 span.
func TestFillers(t *testing.T) {
	for _, tc := range []struct{ from, to int64 }{{5, 6}, {10, 1000}, {0, 1<<31 + 7}} {
		next := tc.from
		for _, b := range Fillers(tc.from, tc.to, 3, 1700000000000) {
			if err := Validate(b, 0); err != nil {
				t.Fatalf("[%d, %d): %v", tc.from, tc.to, err)
			}
			h, _ := ParseHeader(b)
			if h.BaseOffset != next || h.RecordCount != 0 || h.ProducerID != -1 || h.PartitionLeaderEpoch != 3 || h.MaxTimestamp != 1700000000000 {
				t.Fatalf("[%d, %d): filler %+v at %d", tc.from, tc.to, h, next)
			}
			next = h.NextOffset()
		}
		if next != tc.to {
			t.Fatalf("[%d, %d): fillers end at %d", tc.from, tc.to, next)
		}
	}
	if len(Fillers(4, 4, 0, 0)) != 0 {
		t.Fatal("fillers for an empty range")
	}
}
