// Package batch is the codec for Kafka RecordBatch v2 (magic 2), the unit
// that the storage engine writes to disk and the Kafka front-end sends and
// receives unchanged.
//
// It owns the byte layout of a batch: parsing and validating headers,
// rewriting the fields the log assigns (base offset, leader epoch), building
// uncompressed batches and iterating over their records. It is a leaf: it must
// never do I/O, import anything of sluice, or keep state between calls.
//
// Layout (all integers big-endian; the CRC-32C covers bytes 21..end):
//
//	offset size field
//	     0    8 baseOffset            assigned by the log
//	     8    4 batchLength           bytes after this field (total = 12 + batchLength)
//	    12    4 partitionLeaderEpoch  assigned by the log (Raft term later)
//	    16    1 magic                 always 2
//	    17    4 crc                   CRC-32C (Castagnoli) of bytes 21..end
//	    21    2 attributes            bits 0-2 codec, 3 log-append-time, 4 transactional, 5 control
//	    23    4 lastOffsetDelta
//	    27    8 baseTimestamp         ms since the epoch
//	    35    8 maxTimestamp
//	    43    8 producerId            -1: none
//	    51    2 producerEpoch
//	    53    4 baseSequence
//	    57    4 recordCount
//	    61    … records, compressed as a whole when the codec is not 0
//
// A record (varints are zigzag, as in protobuf sint32/sint64):
//
//	length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
//	keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
//	headerCount varint | { keyLength varint | key | valueLength varint | value }*
//
// Because baseOffset, batchLength and partitionLeaderEpoch come before the
// CRC'd range, SetBaseOffset and SetLeaderEpoch rewrite them in place without
// recomputing the checksum: the broker can stamp a producer's batch and store
// exactly the bytes the producer checksummed.
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sizes and positions of the fixed header.
const (
	HeaderSize = 61 // bytes before the first record
	LengthSize = 12 // baseOffset + batchLength: the prefix that frames a batch
	Magic      = 2

	offLeaderEpoch = 12
	offMagic       = 16
	offCRC         = 17
	offAttributes  = 21 // start of the CRC'd range
)

// Compression is the codec in attribute bits 0-2.
type Compression int8

// Codecs defined by Kafka.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// Attribute bits.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// Sentinel errors. Every validation failure is an *Error whose Unwrap
// returns one of these, so callers can test with errors.Is.
var (
	ErrCorrupt    = errors.New("corrupt record batch")
	ErrBadMagic   = errors.New("unsupported record batch magic")
	ErrTooLarge   = errors.New("record batch too large")
	ErrCompressed = errors.New("record batch compression codec not supported") // reserved for codecs Kafka may add
	ErrNoRecords  = errors.New("record batch has no records")
)

// Error describes why a batch was rejected.
type Error struct {
	Reason string // human-readable detail
	Err    error  // one of the sentinels above
}

func (e *Error) Error() string { return fmt.Sprintf("batch: %v: %s", e.Err, e.Reason) }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

func corrupt(format string, args ...any) error {
	return &Error{Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the fixed part of a batch.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the whole batch length in bytes, as declared by its header.
func (h Header) Size() int64 { return LengthSize + int64(h.BatchLength) }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset the log assigns to the batch after this one.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression returns the codec of the records section.
func (h Header) Compression() Compression { return Compression(h.Attributes & attrCodecMask) }

// LogAppendTime reports whether timestamps were set by the broker.
func (h Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports whether the batch is part of a transaction.
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds a control record (commit/abort marker).
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// ParseHeader decodes the fixed header. It checks only that b is long enough;
// Validate checks the rest.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, corrupt("%d bytes, header needs %d", len(b), HeaderSize)
	}
	be := binary.BigEndian
	return Header{
		BaseOffset:           int64(be.Uint64(b[0:])),
		BatchLength:          int32(be.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[12:])),
		Magic:                int8(b[16]),
		CRC:                  be.Uint32(b[17:]),
		Attributes:           int16(be.Uint16(b[21:])),
		LastOffsetDelta:      int32(be.Uint32(b[23:])),
		BaseTimestamp:        int64(be.Uint64(b[27:])),
		MaxTimestamp:         int64(be.Uint64(b[35:])),
		ProducerID:           int64(be.Uint64(b[43:])),
		ProducerEpoch:        int16(be.Uint16(b[51:])),
		BaseSequence:         int32(be.Uint32(b[53:])),
		RecordCount:          int32(be.Uint32(b[57:])),
	}, nil
}

// FrameSize returns the total size of the batch starting at b from its
// 12-byte prefix, checking only that the declared length can hold a header.
// It lets a reader walk a stream of batches without parsing them.
func FrameSize(b []byte) (int64, error) {
	if len(b) < LengthSize {
		return 0, corrupt("%d bytes, length prefix needs %d", len(b), LengthSize)
	}
	n := int64(int32(binary.BigEndian.Uint32(b[8:])))
	if n < HeaderSize-LengthSize {
		return 0, corrupt("batchLength %d shorter than a header", n)
	}
	return LengthSize + n, nil
}

// Validate checks that b is exactly one well-formed batch no larger than
// maxBytes (0: no limit): magic 2, lengths consistent, CRC-32C correct,
// record count consistent with lastOffsetDelta, and, for uncompressed
// batches, records that decode exactly to the end of the batch.
func Validate(b []byte, maxBytes int) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if h.Magic != Magic {
		return &Error{Reason: fmt.Sprintf("magic %d", h.Magic), Err: ErrBadMagic}
	}
	if maxBytes > 0 && len(b) > maxBytes {
		return &Error{Reason: fmt.Sprintf("%d bytes, limit %d", len(b), maxBytes), Err: ErrTooLarge}
	}
	if h.BatchLength < HeaderSize-LengthSize || h.Size() != int64(len(b)) {
		return corrupt("batchLength %d does not match %d bytes", h.BatchLength, len(b))
	}
	if got := crc32.Checksum(b[offAttributes:], castagnoli); got != h.CRC {
		return corrupt("crc %08x, computed %08x", h.CRC, got)
	}
	if h.RecordCount < 0 || h.LastOffsetDelta < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
		return corrupt("recordCount %d with lastOffsetDelta %d", h.RecordCount, h.LastOffsetDelta)
	}
	switch h.Compression() {
	case CompressionNone:
		return checkRecords(b[HeaderSize:], h)
	case CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd:
		// The CRC proves the bytes are the producer's; decompressing here
		// would cost more than the write. Consumers decompress.
		return nil
	default:
		return corrupt("unknown compression codec %d", h.Compression())
	}
}

// checkRecords walks an uncompressed records section without allocating.
func checkRecords(p []byte, h Header) error {
	lastDelta := int64(-1)
	for i := int32(0); i < h.RecordCount; i++ {
		var r rawRecord
		n, err := decodeRecord(p, &r)
		if err != nil {
			return corrupt("record %d: %v", i, err)
		}
		if r.offsetDelta <= lastDelta || r.offsetDelta > int64(h.LastOffsetDelta) {
			return corrupt("record %d: offsetDelta %d out of order", i, r.offsetDelta)
		}
		lastDelta = r.offsetDelta
		p = p[n:]
	}
	if len(p) != 0 {
		return corrupt("%d bytes after the last record", len(p))
	}
	return nil
}

// SetBaseOffset stamps the base offset. The field is outside the CRC'd range.
func SetBaseOffset(b []byte, offset int64) {
	if len(b) >= 8 {
		binary.BigEndian.PutUint64(b, uint64(offset))
	}
}

// SetLeaderEpoch stamps the partition leader epoch (Raft term). The field is
// outside the CRC'd range.
func SetLeaderEpoch(b []byte, epoch int32) {
	if len(b) >= offLeaderEpoch+4 {
		binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
	}
}

// ComputeCRC returns the CRC-32C of the checksummed range of b.
func ComputeCRC(b []byte) uint32 {
	if len(b) < offAttributes {
		return 0
	}
	return crc32.Checksum(b[offAttributes:], castagnoli)
}
