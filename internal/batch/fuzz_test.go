package batch

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzValidate feeds arbitrary bytes to every decoder: none may panic, and a
// batch Validate accepts must decode into exactly its record count (or say
// its codec is unsupported).
func FuzzValidate(f *testing.F) {
	good, _ := Build(sample(f), Options{BaseOffset: 3})
	f.Add(good)
	f.Add(good[:HeaderSize])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseHeader(b)
		FrameSize(b)
		err := Validate(b, 1<<20)
		var be *Error
		if err != nil && !errors.As(err, &be) {
			t.Fatalf("untyped error %T: %v", err, err)
		}
		n := 0
		var iterErr error
		for _, e := range Records(b) {
			if e != nil {
				iterErr = e
				break
			}
			n++
		}
		if err == nil && iterErr == nil {
			h, _ := ParseHeader(b)
			if int32(n) != h.RecordCount {
				t.Fatalf("%d records, header says %d", n, h.RecordCount)
			}
		}
		if err == nil && iterErr != nil && !errors.Is(iterErr, ErrCompressed) && !errors.Is(iterErr, ErrCorrupt) && !errors.Is(iterErr, ErrTooLarge) {
			t.Fatalf("valid batch, records error %v", iterErr)
		}
	})
}

// FuzzRecords builds a batch from fuzzed records and checks it validates and
// decodes back to the same records.
func FuzzRecords(f *testing.F) {
	f.Add([]byte("key"), []byte("value"), int64(1700000000000), int64(5), uint8(2))
	f.Add([]byte{}, []byte(nil), int64(-1), int64(-1<<40), uint8(0))
	f.Fuzz(func(t *testing.T, key, value []byte, ts, step int64, headers uint8) {
		recs := make([]Record, 1+int(headers%4))
		for i := range recs {
			recs[i] = Record{Timestamp: ts + int64(i)*step, Key: key, Value: value}
			for j := range int(headers % 3) {
				recs[i].Headers = append(recs[i].Headers, RecordHeader{Key: string(key), Value: bytes.Repeat(value, j)})
			}
		}
		b, err := Build(recs, Options{BaseOffset: 7})
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(b, 0); err != nil {
			t.Fatal(err)
		}
		i := 0
		for r, err := range Records(b) {
			if err != nil {
				t.Fatal(err)
			}
			w := recs[i]
			if r.Offset != 7+int64(i) || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
				t.Fatalf("record %d: %+v want %+v", i, r, w)
			}
			i++
		}
		if i != len(recs) {
			t.Fatalf("%d of %d records", i, len(recs))
		}
	})
}
