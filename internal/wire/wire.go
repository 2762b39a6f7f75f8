// Package wire is the decoding sluice's own binary formats share: the cluster's replicated
// state machines' entries and snapshots (internal/cluster/meta, internal/cluster/replqueue)
// and the small state snapshots beside a partition log (internal/producer's idempotent
// producers, internal/broker's transactions): varints and length-prefixed bytes read from a
// buffer, the first failure kept and every later read a no-op, so a decoder reads a whole
// record and checks one error at the end.
//
// It owns no format: each state machine says what its fields are. It must never allocate
// past its input (a length is checked against what is left before it is sliced) nor
// import anything of the module.
package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Decoder reads from B. Bad is the error every failure wraps (the state machine's
// "malformed" sentinel); Err is the first failure, nil while every read succeeded.
type Decoder struct {
	B   []byte
	Bad error
	Err error
}

// Fail records a failure, unless one is recorded already.
func (d *Decoder) Fail(f string, v ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: %s", d.Bad, fmt.Sprintf(f, v...))
	}
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail("bad uvarint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Int32 reads a signed varint that must fit an int32.
func (d *Decoder) Int32() int32 {
	v := d.Varint()
	if d.Err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		d.Fail("int32 %d out of range", v)
		return 0
	}
	return int32(v)
}

// Bytes reads a uvarint length and that many bytes, at most limit; the result aliases B
// (capacity cut, so an append to it never overwrites what follows).
func (d *Decoder) Bytes(limit uint64) []byte {
	n := d.Uvarint()
	if d.Err != nil {
		return nil
	}
	if n > limit || n > uint64(len(d.B)) {
		d.Fail("length %d (limit %d, %d left)", n, limit, len(d.B))
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

// Done fails if anything is left: a command ends with its last field.
func (d *Decoder) Done() {
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("%d trailing bytes", len(d.B))
	}
}
