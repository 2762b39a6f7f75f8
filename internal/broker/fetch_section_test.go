package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/sluice-mq/sluice/internal/batch"
)

// zstdBatch re-encodes a built batch's records with zstd, as a Kafka
// client sends them.
func zstdBatch(t *testing.T, values ...string) []byte {
	t.Helper()
	plain := buildBatch(t, nil, values...)
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	out := append(bytes.Clone(plain[:batch.HeaderSize]), zw.EncodeAll(plain[batch.HeaderSize:], nil)...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-batch.LengthSize))
	binary.BigEndian.PutUint16(out[21:], uint16(batch.CompressionZstd))
	binary.BigEndian.PutUint32(out[17:], batch.ComputeCRC(out))
	return out
}

// TestFetchSectionNoZstd: with NoZstd a section ends before the first zstd
// batch, and one that starts at a zstd batch is refused with
// ErrUnsupportedCompression and the partition's offsets; without it every
// batch is sent as stored.
func TestFetchSectionNoZstd(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("z", 1)
	plain, z := buildBatch(t, nil, "a", "b"), zstdBatch(t, "c", "d")
	// Offsets: 0-1 plain | 2-3 zstd | 4-5 plain
	for _, raw := range [][]byte{plain, z, plain} {
		if _, err := e.produceRaw("z", 0, raw); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		offset int64
		noZstd bool
		want   int64 // section length
		err    error
	}{
		{"old-reader-cut-before-zstd", 0, true, int64(len(plain)), nil},
		{"old-reader-at-zstd", 2, true, 0, ErrUnsupportedCompression},
		{"old-reader-inside-zstd", 3, true, 0, ErrUnsupportedCompression},
		{"old-reader-after-zstd", 4, true, int64(len(plain)), nil},
		{"new-reader-everything", 0, false, int64(2*len(plain) + len(z)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.b.FetchSection("z", 0, tc.offset, SectionOptions{NoZstd: tc.noZstd})
			if !errors.Is(err, tc.err) || res.Section.Length != tc.want {
				t.Fatalf("section of %d bytes, err %v; want %d, %v", res.Section.Length, err, tc.want, tc.err)
			}
			if res.HighWatermark != 6 || res.LogStartOffset != 0 {
				t.Fatalf("partition state %+v, want high watermark 6 even with the error", res.PartitionState)
			}
		})
	}
}
