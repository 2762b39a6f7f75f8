package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBuildReadsInKmsg: franz-go's codec accepts what Build writes, field
// for field and record for record.
func TestBuildReadsInKmsg(t *testing.T) {
	recs := sample(t)
	b, err := Build(recs, Options{BaseOffset: 12, LeaderEpoch: 3, Producer: &Producer{ID: 77, Epoch: 1, BaseSequence: 9}})
	if err != nil {
		t.Fatal(err)
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if kb.FirstOffset != 12 || kb.PartitionLeaderEpoch != 3 || kb.Magic != 2 || kb.NumRecords != 3 || kb.LastOffsetDelta != 2 ||
		kb.ProducerID != 77 || kb.ProducerEpoch != 1 || kb.FirstSequence != 9 || kb.FirstTimestamp != 1000 || kb.MaxTimestamp != 1005 ||
		uint32(kb.CRC) != crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) || int(kb.Length) != len(b)-12 {
		t.Fatalf("kmsg read %+v", kb)
	}
	p := kb.Records
	for i, w := range recs {
		l, n := binary.Varint(p)
		var kr kmsg.Record
		if err := kr.ReadFrom(p[:n+int(l)]); err != nil {
			t.Fatal(err)
		}
		p = p[n+int(l):]
		if kr.OffsetDelta != int32(i) || kb.FirstTimestamp+kr.TimestampDelta64 != w.Timestamp ||
			!bytes.Equal(kr.Key, w.Key) || !bytes.Equal(kr.Value, w.Value) || len(kr.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %+v", i, kr)
		}
	}
}

// TestKmsgBatchValidates: a batch encoded by franz-go passes Validate and
// decodes with Records.
func TestKmsgBatchValidates(t *testing.T) {
	var records []byte
	for i := range 3 {
		r := kmsg.Record{TimestampDelta64: int64(i * 10), OffsetDelta: int32(i), Key: []byte{byte(i)}, Value: []byte("v"),
			Headers: []kmsg.Header{{Key: "a", Value: []byte("b")}}}
		body := r.AppendTo(nil)[1:] // encoded with Length 0: one varint byte
		r.Length = int32(len(body))
		records = r.AppendTo(records)
	}
	kb := kmsg.RecordBatch{FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: 2, FirstTimestamp: 500,
		MaxTimestamp: 520, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 3, Records: records}
	kb.Length = int32(HeaderSize - LengthSize + len(records))
	b := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], ComputeCRC(b))
	if err := Validate(b, 0); err != nil {
		t.Fatal(err)
	}
	n := 0
	for r, err := range Records(b) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset != int64(n) || r.Timestamp != 500+int64(n*10) || r.Headers[0].Key != "a" {
			t.Fatalf("record %+v", r)
		}
		n++
	}
	if n != 3 {
		t.Fatal(n)
	}
}

// withCodec re-encodes an uncompressed batch's records with codec c.
func withCodec(t testing.TB, b []byte, c Compression) []byte {
	t.Helper()
	recs := b[HeaderSize:]
	var buf bytes.Buffer
	switch c {
	case CompressionGzip:
		zw := gzip.NewWriter(&buf)
		zw.Write(recs)
		zw.Close()
	case CompressionSnappy:
		buf.Write(s2.EncodeSnappy(nil, recs))
	case -CompressionSnappy: // the Java client's xerial framing, two chunks
		c = CompressionSnappy
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for _, part := range [][]byte{recs[:len(recs)/2], recs[len(recs)/2:]} {
			blk := s2.EncodeSnappy(nil, part)
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(blk))))
			buf.Write(blk)
		}
	case CompressionLZ4:
		zw := lz4.NewWriter(&buf)
		zw.Write(recs)
		zw.Close()
	case CompressionZstd:
		zw, _ := zstd.NewWriter(nil)
		buf.Write(zw.EncodeAll(recs, nil))
		zw.Close()
	}
	out := append(bytes.Clone(b[:HeaderSize]), buf.Bytes()...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-LengthSize))
	binary.BigEndian.PutUint16(out[21:], uint16(c))
	binary.BigEndian.PutUint32(out[17:], ComputeCRC(out))
	return out
}

func TestCompressedRecords(t *testing.T) {
	plain, _ := Build(sample(t), Options{})
	for _, c := range []Compression{CompressionGzip, CompressionSnappy, -CompressionSnappy, CompressionLZ4, CompressionZstd} {
		b := withCodec(t, plain, c)
		if err := Validate(b, 0); err != nil {
			t.Fatalf("codec %d: %v", c, err)
		}
		n := 0
		for r, err := range Records(b) {
			if err != nil {
				t.Fatalf("codec %d: %v", c, err)
			}
			if !bytes.Equal(r.Value, sample(t)[n].Value) || r.Offset != int64(n) {
				t.Fatalf("codec %d: record %d", c, n)
			}
			n++
		}
		if n != 3 {
			t.Fatalf("codec %d: %d records", c, n)
		}
		// Damaged compressed data is an error, not a panic.
		bad := bytes.Clone(b)
		for i := HeaderSize; i < len(bad); i += 3 {
			bad[i] ^= 0x5a
		}
		binary.BigEndian.PutUint32(bad[17:], ComputeCRC(bad))
		for _, err := range Records(bad) {
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("codec %d: damaged data: %v", c, err)
			}
		}
	}
}
