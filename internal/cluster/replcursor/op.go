package replcursor

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/wire"
)

// Kind is a cursor command's kind.
type Kind byte

const (
	Receive Kind = 2
	Ack     Kind = 3
	Nack    Kind = 4
	Extend  Kind = 5
)

// Limits of a decoded command.
const (
	MaxReceipt = 1 << 10 // a receipt
	MaxReceive = 1000    // deliveries of one Receive
)

// Op is one cursor command.
type Op struct {
	Kind    Kind
	Max     int           // Receive: 1..MaxReceive
	Timeout time.Duration // Receive: visibility (0: the cursor's); Extend: the new visibility
	Delay   time.Duration // Nack: hidden that long before a redelivery
	Receipt string        // Ack, Nack, Extend
}

// Append appends the command's fields (its kind excluded: the caller's format places it):
//
//	Receive  max(uvarint) visibility(varint ns)
//	Ack      receipt(bytes)
//	Nack     receipt(bytes) delay(varint ns)
//	Extend   receipt(bytes) visibility(varint ns)
func (o *Op) Append(b []byte) []byte {
	switch o.Kind {
	case Receive:
		b = binary.AppendUvarint(b, uint64(o.Max))
		b = binary.AppendVarint(b, int64(o.Timeout))
	case Ack:
		b = AppendBytes(b, []byte(o.Receipt))
	case Nack:
		b = AppendBytes(b, []byte(o.Receipt))
		b = binary.AppendVarint(b, int64(o.Delay))
	case Extend:
		b = AppendBytes(b, []byte(o.Receipt))
		b = binary.AppendVarint(b, int64(o.Timeout))
	}
	return b
}

// Known reports whether k is a cursor command.
func Known(k Kind) bool { return k >= Receive && k <= Extend }

// Read reads the fields of a command of kind k (Known) from d; d keeps the first failure.
func Read(d *wire.Decoder, k Kind) Op {
	o := Op{Kind: k}
	switch k {
	case Receive:
		n := d.Uvarint()
		if d.Err == nil && (n == 0 || n > MaxReceive) {
			d.Fail("receive max %d (1..%d)", n, MaxReceive)
		}
		o.Max = int(n)
		o.Timeout = Duration(d)
	case Ack:
		o.Receipt = string(d.Bytes(MaxReceipt))
	case Nack:
		o.Receipt = string(d.Bytes(MaxReceipt))
		o.Delay = Duration(d)
	case Extend:
		o.Receipt = string(d.Bytes(MaxReceipt))
		o.Timeout = Duration(d)
	default:
		d.Fail("unknown cursor op %d", k)
	}
	return o
}

// Check refuses, before proposing, what every replica's Read would refuse: a replica stops
// the group on an entry it cannot decode, so such an entry must never be in the log.
func (o *Op) Check() bool {
	switch {
	case !Known(o.Kind), len(o.Receipt) > MaxReceipt, o.Timeout < 0, o.Delay < 0,
		o.Timeout == math.MaxInt64, o.Delay == math.MaxInt64:
		return false
	case o.Kind == Receive:
		return o.Max > 0 && o.Max <= MaxReceive
	}
	return true
}

// AppendBytes appends a uvarint length and v.
func AppendBytes(b, v []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }

// Duration reads a non-negative varint of nanoseconds.
func Duration(d *wire.Decoder) time.Duration {
	v := d.Varint()
	if v < 0 || v == math.MaxInt64 {
		d.Fail("duration %d out of range", v)
		return 0
	}
	return time.Duration(v)
}

// Run applies a command to a cursor at now (the group's clamped time). A refusal (a stale
// receipt, an out-of-range value) is err, a result for the proposer, not an apply failure;
// evs are the events the cursor applied (what finished, for a caller that keeps bodies).
func Run(cur *queue.Cursor, now time.Time, o Op) (ds []queue.Delivery, evs []queue.Event, err error) {
	switch o.Kind {
	case Receive:
		return cur.Receive(now, o.Max, o.Timeout)
	case Ack:
		evs, err = cur.Ack(now, o.Receipt)
	case Nack:
		evs, err = cur.Nack(now, o.Receipt, o.Delay, "")
	case Extend:
		evs, err = cur.Extend(now, o.Receipt, o.Timeout)
	}
	return nil, evs, err
}
