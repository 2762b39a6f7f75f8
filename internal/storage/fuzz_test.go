package storage

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// FuzzRecoverTail appends good batches, then arbitrary bytes at the end of
// the active segment file (a torn or garbage write), and checks that Open
// succeeds and serves every good batch byte for byte, and that appends work.
func FuzzRecoverTail(f *testing.F) {
	good := mkBatch(f, 2, 20, 1)
	f.Add(uint8(3), uint8(0), []byte{})
	f.Add(uint8(1), uint8(1), good[:30])
	f.Add(uint8(5), uint8(2), good[:len(good)-1])
	f.Add(uint8(2), uint8(0), append(good[:8:8], 0, 0, 0, 200))
	f.Add(uint8(0), uint8(3), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, n, interval uint8, tail []byte) {
		mfs := vfs.NewMem()
		o := testOptions(t, mfs, "/p")
		o.IndexIntervalBytes = 1 + int(interval)*40
		l := mustOpen(t, o)
		var sent [][]byte
		for i := range int(n % 8) {
			b := mkBatch(t, 1+i%3, 20*i, int64(i))
			mustAppend(t, l, b)
			sent = append(sent, b)
		}
		path := l.active.path(logSuffix)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		fh, err := mfs.OpenAppend(path)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(tail)
		fh.Close()
		l, err = Open(o)
		if err != nil {
			t.Fatalf("Open after a garbage tail: %v", err)
		}
		defer l.Close()
		got := readAllBatches(t, l, 0)
		if len(got) < len(sent) {
			t.Fatalf("%d batches, want at least %d", len(got), len(sent))
		}
		off := int64(0)
		for i := range sent {
			if !sameBatch(got[i], sent[i], off) {
				t.Fatalf("batch %d differs", i)
			}
			off += int64(1 + i%3)
		}
		mustAppend(t, l, mkBatch(t, 1, 5, 1))
	})
}

// FuzzQuarantineList decodes arbitrary bytes as a quarantine list: it must
// never panic, and whatever it accepts must encode back to a list that
// decodes to the same entries.
func FuzzQuarantineList(f *testing.F) {
	good := encodeQuarantine([]qentry{
		{Segment: segmentName(0, logSuffix), Position: 61, Length: 100, FirstOffset: 3, LastOffset: 5, FoundMS: 1, Reason: "crc"},
		{Segment: segmentName(40, logSuffix), Position: 0, Length: 7, FirstOffset: 40, LastOffset: 39, FoundMS: 2},
	})
	f.Add(good)
	f.Add(encodeQuarantine(nil))
	f.Add([]byte(`{"version":1,"batches":[],"crc32c":0}`))
	f.Add([]byte(`{"version":2}`))
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeQuarantine(b)
		if err != nil {
			return
		}
		again, err := decodeQuarantine(encodeQuarantine(entries))
		if err != nil {
			t.Fatalf("re-encoded list refused: %v", err)
		}
		if len(again) != len(entries) {
			t.Fatalf("%d entries, then %d", len(entries), len(again))
		}
		for i := range entries {
			if again[i] != entries[i] {
				t.Fatalf("entry %d: %+v, then %+v", i, entries[i], again[i])
			}
		}
	})
}
