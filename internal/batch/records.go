package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
)

// Record is one message of a batch.
type Record struct {
	// Offset is base offset + offset delta. Set by Records; ignored by Build,
	// which numbers records 0, 1, 2… within the batch.
	Offset int64
	// Timestamp in milliseconds since the Unix epoch.
	Timestamp int64
	// Key and Value are nil for a Kafka null, non-nil and empty for "".
	// Records returns slices that alias the batch: copy them to keep them.
	Key, Value []byte
	Headers    []RecordHeader
}

// RecordHeader is one key/value header of a record.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Producer identifies an idempotent or transactional producer.
type Producer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// Options are the batch-level fields Build sets.
type Options struct {
	BaseOffset    int64
	LeaderEpoch   int32
	Producer      *Producer // nil: no producer (-1, -1, -1)
	Transactional bool
	Control       bool
	LogAppendTime bool
}

// Build encodes records as one uncompressed batch. The base timestamp is the
// first record's; maxTimestamp is the largest.
func Build(records []Record, opts Options) ([]byte, error) {
	return AppendBuild(make([]byte, 0, HeaderSize+estimate(records)), records, opts)
}

// AppendBuild is Build appending the batch to dst (which it may grow), so a caller
// that writes the batch out and forgets it can reuse one buffer. Each record is
// encoded straight into place behind a length prefix computed beforehand: no
// intermediate copy of its key and value.
func AppendBuild(dst []byte, records []Record, opts Options) ([]byte, error) {
	if len(records) == 0 {
		return dst, &Error{Reason: "Build needs at least one record", Err: ErrNoRecords}
	}
	if len(records) > math.MaxInt32 {
		return dst, &Error{Reason: "too many records", Err: ErrTooLarge}
	}
	base := records[0].Timestamp
	maxTS := base
	for _, r := range records {
		maxTS = max(maxTS, r.Timestamp)
	}
	start := len(dst)
	dst = slices.Grow(dst, HeaderSize+estimate(records))[:start+HeaderSize]
	clear(dst[start:])
	for i, r := range records {
		dst = binary.AppendVarint(dst, recordBodyLen(r, r.Timestamp-base, int64(i)))
		dst = appendRecordBody(dst, r, r.Timestamp-base, int64(i))
	}
	b := dst[start:]
	if len(b)-LengthSize > math.MaxInt32 {
		return dst[:start], &Error{Reason: fmt.Sprintf("%d bytes", len(b)), Err: ErrTooLarge}
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(opts.BaseOffset))
	be.PutUint32(b[8:], uint32(len(b)-LengthSize))
	be.PutUint32(b[12:], uint32(opts.LeaderEpoch))
	b[offMagic] = Magic
	be.PutUint16(b[21:], uint16(opts.attributes()))
	be.PutUint32(b[23:], uint32(len(records)-1))
	be.PutUint64(b[27:], uint64(base))
	be.PutUint64(b[35:], uint64(maxTS))
	p := Producer{ID: -1, Epoch: -1, BaseSequence: -1}
	if opts.Producer != nil {
		p = *opts.Producer
	}
	be.PutUint64(b[43:], uint64(p.ID))
	be.PutUint16(b[51:], uint16(p.Epoch))
	be.PutUint32(b[53:], uint32(p.BaseSequence))
	be.PutUint32(b[57:], uint32(len(records)))
	be.PutUint32(b[offCRC:], ComputeCRC(b))
	return dst, nil
}

func (o Options) attributes() int16 {
	var a int16
	if o.LogAppendTime {
		a |= attrLogAppendTime
	}
	if o.Transactional {
		a |= attrTransactional
	}
	if o.Control {
		a |= attrControl
	}
	return a
}

func estimate(records []Record) int {
	n := 0
	for _, r := range records {
		n += len(r.Key) + len(r.Value) + 16
		for _, h := range r.Headers {
			n += len(h.Key) + len(h.Value) + 4
		}
	}
	return n
}

// appendRecordBody encodes everything of a record after its length prefix.
func appendRecordBody(b []byte, r Record, tsDelta, offDelta int64) []byte {
	b = append(b, 0) // record attributes: unused by Kafka
	b = binary.AppendVarint(b, tsDelta)
	b = binary.AppendVarint(b, offDelta)
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	b = binary.AppendVarint(b, int64(len(r.Headers)))
	for _, h := range r.Headers {
		b = binary.AppendVarint(b, int64(len(h.Key)))
		b = append(b, h.Key...)
		b = appendBytes(b, h.Value)
	}
	return b
}

// recordBodyLen is the length appendRecordBody will append: a record's length prefix.
func recordBodyLen(r Record, tsDelta, offDelta int64) int64 {
	n := 1 + varintLen(tsDelta) + varintLen(offDelta) + bytesLen(r.Key) + bytesLen(r.Value) +
		varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return int64(n)
}

// bytesLen is the length appendBytes appends for v.
func bytesLen(v []byte) int {
	if v == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(v))) + len(v)
}

// varintLen is the length binary.AppendVarint appends for x.
func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	n := 1
	for ux >= 0x80 {
		ux >>= 7
		n++
	}
	return n
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// rawRecord is a decoded record whose slices alias the input.
type rawRecord struct {
	tsDelta, offsetDelta int64
	key, value           []byte
	headerCount          int
	headers              []byte // encoded headers, decoded on demand
}

var errShort = errors.New("truncated")

// decodeRecord decodes one length-prefixed record at the start of p and
// returns how many bytes it used. Header entries are checked, not allocated.
func decodeRecord(p []byte, r *rawRecord) (int, error) {
	length, n := binary.Varint(p)
	if n <= 0 || length < 0 || length > int64(len(p)-n) {
		return 0, fmt.Errorf("record length: %w", errShort)
	}
	body := p[n : n+int(length)]
	d := decoder{b: body}
	if len(d.b) < 1 {
		return 0, errShort
	}
	d.b = d.b[1:] // attributes
	r.tsDelta = d.varint()
	r.offsetDelta = d.varint()
	r.key = d.bytes()
	r.value = d.bytes()
	count := d.varint()
	if d.err == nil && (count < 0 || count > int64(len(d.b))) {
		return 0, fmt.Errorf("header count %d", count)
	}
	hdrStart := len(body) - len(d.b)
	for i := int64(0); i < count && d.err == nil; i++ {
		if k := d.bytes(); k == nil && d.err == nil {
			d.err = errors.New("null header key")
		}
		d.bytes()
	}
	if d.err != nil {
		return 0, d.err
	}
	if len(d.b) != 0 {
		return 0, fmt.Errorf("%d trailing bytes in record", len(d.b))
	}
	r.headerCount = int(count)
	r.headers = body[hdrStart:]
	return n + int(length), nil
}

// decoder reads varints and length-prefixed byte strings, remembering the
// first error so callers check once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("varint: %w", errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	l := d.varint()
	if d.err != nil {
		return nil
	}
	if l < 0 {
		return nil
	}
	if l > int64(len(d.b)) {
		d.err = fmt.Errorf("length %d: %w", l, errShort)
		return nil
	}
	v := d.b[:l:l]
	d.b = d.b[l:]
	return v
}

func (r *rawRecord) record(h Header) Record {
	rec := Record{
		Offset:    h.BaseOffset + r.offsetDelta,
		Timestamp: h.BaseTimestamp + r.tsDelta,
		Key:       r.key,
		Value:     r.value,
	}
	if h.LogAppendTime() {
		rec.Timestamp = h.MaxTimestamp
	}
	if r.headerCount > 0 {
		rec.Headers = make([]RecordHeader, 0, r.headerCount)
		d := decoder{b: r.headers}
		for range r.headerCount {
			k := d.bytes()
			v := d.bytes()
			rec.Headers = append(rec.Headers, RecordHeader{Key: string(k), Value: v})
		}
	}
	return rec
}

// Records iterates over the records of one batch. It validates the batch
// first (so a corrupt batch yields one error and nothing else) and
// decompresses gzip, snappy, lz4 and zstd records. Iteration stops at the
// first error.
func Records(b []byte) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if err := Validate(b, 0); err != nil {
			yield(Record{}, err)
			return
		}
		h, _ := ParseHeader(b)
		p := b[HeaderSize:]
		if h.Compression() != CompressionNone {
			var err error
			if p, err = decompress(h.Compression(), p); err != nil {
				yield(Record{}, err)
				return
			}
		}
		if err := checkRecords(p, h); err != nil {
			yield(Record{}, err)
			return
		}
		for range h.RecordCount {
			var r rawRecord
			n, _ := decodeRecord(p, &r) // checked above
			p = p[n:]
			if !yield(r.record(h), nil) {
				return
			}
		}
	}
}
