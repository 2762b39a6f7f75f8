package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// clock is an injected time source tests move by hand.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// mkBatch builds an uncompressed batch of n records of valueSize bytes with
// timestamps ts, ts+1, ….
func mkBatch(t testing.TB, n, valueSize int, ts int64) []byte {
	t.Helper()
	recs := make([]batch.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
		recs[i] = batch.Record{Timestamp: ts + int64(i), Key: []byte(fmt.Sprint(i)), Value: v}
	}
	b, err := batch.Build(recs, batch.Options{LeaderEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testFiles is the file cache of test logs: no background scrub, so that
// what a test sees read is what it did.
var testFiles = NewFileCache(FileCacheOptions{ScrubBytesPerSec: -1})

func testOptions(t testing.TB, fs vfs.FS, dir string) Options {
	return Options{FS: fs, Dir: dir, Logger: quiet, Now: newClock().Now, Files: testFiles}
}

func mustOpen(t testing.TB, o Options) *Log {
	t.Helper()
	l, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, batches ...[]byte) []int64 {
	t.Helper()
	offs, err := l.Append(context.Background(), batches...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return offs
}

// readAllBatches reads from offset to the high watermark, splitting the
// result into batches. No test that reads a log whole damaged it, so it
// also checks that nothing was quarantined.
func readAllBatches(t testing.TB, l *Log, from int64) [][]byte {
	t.Helper()
	defer func() {
		if q := l.Quarantined(); len(q) != 0 {
			t.Fatalf("good batches quarantined: %+v", q)
		}
	}()
	var out [][]byte
	off := from
	for i := 0; off < l.HighWatermark(); i++ {
		if i > 1_000_000 {
			t.Fatal("read loop does not advance")
		}
		b, err := l.Read(off, 64<<10)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			t.Fatalf("Read(%d) below hw %d returned nothing", off, l.HighWatermark())
		}
		for len(b) > 0 {
			n, err := batch.FrameSize(b)
			if err != nil {
				t.Fatal(err)
			}
			h, _ := batch.ParseHeader(b)
			out = append(out, b[:n])
			off = h.NextOffset()
			b = b[n:]
		}
	}
	return out
}

// sameBatch compares a stored batch with what was appended, ignoring the
// base offset the log stamped.
func sameBatch(stored, sent []byte, base int64) bool {
	if len(stored) != len(sent) {
		return false
	}
	want := bytes.Clone(sent)
	batch.SetBaseOffset(want, base)
	return bytes.Equal(stored, want)
}
