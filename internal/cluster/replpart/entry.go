package replpart

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// entryVersion is the first byte of every entry this package writes.
const entryVersion = 1

// ErrBadEntry: an entry that is not one well-formed produce. The state machine stops the
// group on it rather than skip it (a replica that skipped an entry would diverge).
var ErrBadEntry = errors.New("replpart: malformed entry")

// Entry is one entry of a partition's group: the record batches of one produce, and who
// proposed it (Origin, the node; Request, unique per Origin's run) so the proposing node
// can find its results. Results of other nodes' entries are not kept.
type Entry struct {
	Origin  uint64
	Request uint64
	Batches [][]byte // raw Kafka record batches, each non-empty, at least one
}

// Encode appends e's encoding to b:
//
//	version(1)=1 origin(uvarint) request(uvarint) count(uvarint) {len(uvarint) batch}...
//
// Nothing may follow the last batch.
func (e *Entry) Encode(b []byte) []byte {
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, e.Origin)
	b = binary.AppendUvarint(b, e.Request)
	b = binary.AppendUvarint(b, uint64(len(e.Batches)))
	for _, x := range e.Batches {
		b = binary.AppendUvarint(b, uint64(len(x)))
		b = append(b, x...)
	}
	return b
}

// Size is the length of e's encoding.
func (e *Entry) Size() int {
	n := 1 + uvarintLen(e.Origin) + uvarintLen(e.Request) + uvarintLen(uint64(len(e.Batches)))
	for _, x := range e.Batches {
		n += uvarintLen(uint64(len(x))) + len(x)
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// Decode parses one entry. Any malformed input (an unknown version, no batch, an empty
// batch, a length past the end, trailing bytes) is ErrBadEntry; the batches alias b.
func Decode(b []byte) (Entry, error) {
	var e Entry
	if len(b) == 0 {
		return e, fmt.Errorf("%w: empty", ErrBadEntry)
	}
	if b[0] != entryVersion {
		return e, fmt.Errorf("%w: version %d", ErrBadEntry, b[0])
	}
	b = b[1:]
	var fields [3]uint64
	for i := range fields {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return e, fmt.Errorf("%w: bad uvarint", ErrBadEntry)
		}
		fields[i], b = v, b[n:]
	}
	e.Origin, e.Request = fields[0], fields[1]
	count := fields[2]
	// Every batch takes at least two bytes (its length, one byte of it): a count past
	// that is a lie, refused before it sizes an allocation.
	if count == 0 || count > uint64(len(b))/2 {
		return e, fmt.Errorf("%w: %d batches in %d bytes", ErrBadEntry, count, len(b))
	}
	e.Batches = make([][]byte, 0, count)
	for i := uint64(0); i < count; i++ {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return e, fmt.Errorf("%w: batch %d: bad length", ErrBadEntry, i)
		}
		b = b[k:]
		if n == 0 || n > uint64(len(b)) {
			return e, fmt.Errorf("%w: batch %d: length %d (%d bytes left)", ErrBadEntry, i, n, len(b))
		}
		e.Batches = append(e.Batches, b[:n:n])
		b = b[n:]
	}
	if len(b) > 0 {
		return e, fmt.Errorf("%w: %d trailing bytes", ErrBadEntry, len(b))
	}
	return e, nil
}
