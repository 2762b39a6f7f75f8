package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"
)

// A record of transactions.log: length of the body (4 bytes, big endian),
// CRC-32C of the body (4 bytes), body. Body: format version (1 byte, 1 or
// 2), then the Txn: id, producer id, epoch, last epoch, state (1 byte),
// timeout ms, started and updated as Unix ms (0: zero time), then counted
// lists of partitions (topic, partition), groups, and pending offsets
// (group, topic, partition, offset, leader epoch, metadata); version 2
// adds Ended (producer id, epoch: KIP-890 part 2's bump at EndTxn v5);
// version 3 adds Seq after Ended, which may then be none (-1):
// only a cluster's coordinator counts its transactions (Txn.Seq).
// Integers are varints, strings a uvarint length and the bytes.
//
// A record without an Ended is written as version 1, byte for byte what
// the binaries before version 2 wrote and read: a data directory that
// never saw an EndTxn v5 stays readable by them. One that did is not (an
// older binary cuts the log at the first version 2 record, as it would a
// torn tail): downgrading past version 2 is not supported.
const (
	recordHeader  = 8
	recordVersion = 3
	// maxRecord bounds one record: a length above it is damage, not a
	// record to allocate for.
	maxRecord = 64 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var errCorrupt = errors.New("corrupt transaction record")

// encodeRecord frames t as one log record.
func encodeRecord(t *Txn) []byte {
	b := make([]byte, recordHeader, 64+len(t.ID))
	version := byte(1)
	switch {
	case t.Seq != 0:
		version = 3
	case t.Ended.ID >= 0:
		version = 2
	}
	b = append(b, version)
	b = appendString(b, t.ID)
	b = binary.AppendVarint(b, t.ProducerID)
	b = binary.AppendVarint(b, int64(t.Epoch))
	b = binary.AppendVarint(b, int64(t.LastEpoch))
	b = append(b, byte(t.State))
	b = binary.AppendVarint(b, t.Timeout.Milliseconds())
	b = binary.AppendVarint(b, unixMilli(t.Started))
	b = binary.AppendVarint(b, unixMilli(t.Updated))
	b = binary.AppendUvarint(b, uint64(len(t.Partitions)))
	for _, p := range t.Partitions {
		b = appendString(b, p.Topic)
		b = binary.AppendVarint(b, int64(p.Partition))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Groups)))
	for _, g := range t.Groups {
		b = appendString(b, g)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Offsets)))
	for _, o := range t.Offsets {
		b = appendString(b, o.Group)
		b = appendString(b, o.Topic)
		b = binary.AppendVarint(b, int64(o.Partition))
		b = binary.AppendVarint(b, o.Offset)
		b = binary.AppendVarint(b, int64(o.LeaderEpoch))
		b = appendString(b, o.Metadata)
	}
	if version >= 2 {
		b = binary.AppendVarint(b, t.Ended.ID)
		b = binary.AppendVarint(b, int64(t.Ended.Epoch))
	}
	if version >= 3 {
		b = binary.AppendVarint(b, int64(t.Seq))
	}
	body := b[recordHeader:]
	binary.BigEndian.PutUint32(b[0:4], uint32(len(body)))
	binary.BigEndian.PutUint32(b[4:8], crc32.Checksum(body, crcTable))
	return b
}

// splitRecord returns the first record's body and its framed size, or an
// error if data does not start with a whole, intact record.
func splitRecord(data []byte) ([]byte, int, error) {
	if len(data) < recordHeader {
		return nil, 0, fmt.Errorf("%w: %d bytes, want a header", errCorrupt, len(data))
	}
	n := binary.BigEndian.Uint32(data[0:4])
	if n > maxRecord || int64(n) > int64(len(data)-recordHeader) {
		return nil, 0, fmt.Errorf("%w: length %d past the end", errCorrupt, n)
	}
	body := data[recordHeader : recordHeader+int(n)]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(data[4:8]) {
		return nil, 0, fmt.Errorf("%w: CRC mismatch", errCorrupt)
	}
	return body, recordHeader + int(n), nil
}

// decodeBody reads a record's body; any input gives a Txn or an error.
func decodeBody(body []byte) (*Txn, error) {
	d := decoder{b: body}
	version := d.byte()
	if (version < 1 || version > recordVersion) && d.err == nil {
		return nil, fmt.Errorf("%w: version %d", errCorrupt, version)
	}
	t := &Txn{ID: d.string(), ProducerID: d.varint(), Ended: noProducer}
	t.Epoch, t.LastEpoch = d.int16(), d.int16()
	t.State = State(d.byte())
	t.Timeout = time.Duration(d.varint()) * time.Millisecond
	t.Started, t.Updated = fromMilli(d.varint()), fromMilli(d.varint())
	for n := d.count(); n > 0 && d.err == nil; n-- {
		t.Partitions = append(t.Partitions, Partition{Topic: d.string(), Partition: d.int32()})
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		t.Groups = append(t.Groups, d.string())
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		o := Offset{Group: d.string(), Topic: d.string(), Partition: d.int32(), Offset: d.varint()}
		o.LeaderEpoch, o.Metadata = d.int32(), d.string()
		t.Offsets = append(t.Offsets, o)
	}
	if version >= 2 {
		t.Ended = Producer{ID: d.varint(), Epoch: d.int16()}
	}
	if version >= 3 {
		seq := d.varint()
		if seq < 0 || seq > math.MaxUint32 {
			seq, d.err = 0, fmt.Errorf("%w: sequence", errCorrupt)
		}
		t.Seq = uint32(seq)
	}
	switch {
	case d.err == nil && version == 2 && t.Ended.ID < 0:
		return nil, fmt.Errorf("%w: version 2 without an ended producer", errCorrupt)
	case d.err != nil:
		return nil, d.err
	case len(d.b) != 0:
		return nil, fmt.Errorf("%w: %d bytes after the record", errCorrupt, len(d.b))
	case t.State >= numStates:
		return nil, fmt.Errorf("%w: state %d", errCorrupt, t.State)
	case t.ID == "":
		return nil, fmt.Errorf("%w: empty transactional id", errCorrupt)
	}
	return t, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// decoder reads until the first error, which sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated %s", errCorrupt, what)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Varint(d.b)
	if k <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *decoder) int16() int16 {
	v := d.varint()
	if int64(int16(v)) != v {
		d.fail("int16")
	}
	return int16(v)
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if int64(int32(v)) != v {
		d.fail("int32")
	}
	return int32(v)
}

// count reads a list length, which cannot exceed the bytes left (every
// element takes at least one).
func (d *decoder) count() int {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	if k <= 0 || v > uint64(len(d.b)) {
		d.fail("count")
		return 0
	}
	d.b = d.b[k:]
	return int(v)
}

func (d *decoder) string() string {
	n := d.count()
	if d.err != nil {
		return ""
	}
	if n > len(d.b) {
		d.fail("string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// EncodeTxn is t's record as transactions.log holds it, without the frame: what a Store
// keeps (DecodeTxn reads it).
func EncodeTxn(t *Txn) []byte { return encodeRecord(t)[recordHeader:] }

// DecodeTxn reads a record EncodeTxn wrote.
func DecodeTxn(b []byte) (*Txn, error) { return decodeBody(b) }
