package replqueue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/wire"
)

// Op is a command's kind: its first byte in an entry.
type Op byte

const (
	OpSend    Op = 1
	OpReceive Op = 2
	OpAck     Op = 3
	OpNack    Op = 4
	OpExtend  Op = 5
	// OpPut sends messages with FIFO groups and deduplication keys, all in one entry, so
	// the messages of one call are ordered and committed together (command_put.go).
	OpPut Op = 6
	// OpReceiveLimited is a Receive with a receive limit: a message already received that
	// many times is moved to the dead letters instead of delivered.
	OpReceiveLimited Op = 7
	// OpDeadDone drops dead letters whose copy in the dead-letter queue is committed.
	OpDeadDone Op = 8
	// OpPurge finishes every message sent so far.
	OpPurge Op = 9
	// OpConfigure changes the queue's times (visibility, extension limit, retention) from
	// its place in the log on (configure.go).
	OpConfigure Op = 10
	// OpNackReason is a Nack that says why: the reason a dead-letter copy carries as the
	// message's last (a separate op, since OpNack's encoding has no room for it and older
	// builds stop on a field they do not know).
	OpNackReason Op = 11
)

// Limits of a decoded command: a decoder never allocates past them on any input.
const (
	MaxBody    = 1 << 20 // a message body
	MaxAttrs   = 64      // attributes of one message
	MaxString  = 1 << 10 // an attribute key or value, a receipt, a group ID
	MaxReceive = 1000    // messages of one Receive
	MaxPut     = 1000    // messages of one Put, offsets of one DeadDone
)

// ErrBadCommand: an entry that is not one well-formed command. The state machine stops on
// it rather than skip it (a replica that skipped an entry would diverge).
var ErrBadCommand = errors.New("replqueue: malformed command")

// Attr is one message attribute.
type Attr struct{ Key, Value string }

// Command is one entry of a queue's group. Origin and Request name the proposal so the
// proposing node can find its result (results of other nodes' commands are not kept); Now
// is the proposing leader's clock, the only time apply ever uses.
type Command struct {
	Op      Op
	Origin  uint64    // the proposing node
	Request uint64    // unique per Origin
	Now     time.Time // the leader's clock when it proposed (clamped in apply)

	Body    []byte        // Send
	Attrs   []Attr        // Send, sorted by key on encode
	Delay   time.Duration // Send: hidden until Now+Delay; Nack: the same for a redelivery
	Max     int           // Receive
	Timeout time.Duration // Receive: visibility (0: the queue's); Extend: the new visibility
	Receipt string        // Ack, Nack, Extend
	Reason  string        // NackReason (at most queue.MaxReasonLen bytes)

	Msgs        []Msg         // Put
	Window      time.Duration // Put: how long a deduplication key is remembered
	MaxReceives int           // ReceiveLimited: the receive limit (1..queue.MaxReceivesLimit)
	Offsets     []int64       // DeadDone
	Times       Times         // Configure
}

// Encode appends c's encoding to b.
//
//	op(1) origin(uvarint) request(uvarint) now(varint unix ns), then by op:
//	Send     body(bytes) nattrs(uvarint) {key(bytes) value(bytes)}... delay(varint ns)
//	Receive  max(uvarint) visibility(varint ns)
//	Ack      receipt(bytes)
//	Nack     receipt(bytes) delay(varint ns)
//	Extend   receipt(bytes) visibility(varint ns)
//	Put      window(varint ns) n(uvarint) {msg}...         (msg: see appendMsg)
//	ReceiveLimited max(uvarint) visibility(varint ns) maxReceives(uvarint)
//	DeadDone n(uvarint) {offset(uvarint)}...
//	Purge    (nothing)
//	Configure visibility(varint ns) maxExtension(varint ns) retention(varint ns)
//	NackReason receipt(bytes) delay(varint ns) reason(bytes)
//
// bytes is uvarint length then the bytes. Nothing may follow the last field.
func (c *Command) Encode(b []byte) []byte {
	b = append(b, byte(c.Op))
	b = binary.AppendUvarint(b, c.Origin)
	b = binary.AppendUvarint(b, c.Request)
	b = binary.AppendVarint(b, c.Now.UnixNano())
	switch c.Op {
	case OpSend:
		b = appendBytes(b, c.Body)
		attrs := slices.Clone(c.Attrs)
		slices.SortFunc(attrs, func(x, y Attr) int { return cmpString(x.Key, y.Key) })
		b = binary.AppendUvarint(b, uint64(len(attrs)))
		for _, a := range attrs {
			b = appendBytes(b, []byte(a.Key))
			b = appendBytes(b, []byte(a.Value))
		}
		b = binary.AppendVarint(b, int64(c.Delay))
	case OpReceive:
		b = binary.AppendUvarint(b, uint64(c.Max))
		b = binary.AppendVarint(b, int64(c.Timeout))
	case OpAck:
		b = appendBytes(b, []byte(c.Receipt))
	case OpNack:
		b = appendBytes(b, []byte(c.Receipt))
		b = binary.AppendVarint(b, int64(c.Delay))
	case OpExtend:
		b = appendBytes(b, []byte(c.Receipt))
		b = binary.AppendVarint(b, int64(c.Timeout))
	default:
		b = c.encodeMore(b)
	}
	return b
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func appendBytes(b, v []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }

// Decode parses one command. Any malformed input, trailing bytes included, is
// ErrBadCommand; the body aliases b.
func Decode(b []byte) (Command, error) {
	d := decoder{wire.Decoder{B: b, Bad: ErrBadCommand}}
	var c Command
	if len(b) == 0 {
		return c, fmt.Errorf("%w: empty", ErrBadCommand)
	}
	c.Op = Op(b[0])
	d.B = b[1:]
	c.Origin = d.Uvarint()
	c.Request = d.Uvarint()
	c.Now = time.Unix(0, d.Varint()).UTC()
	switch c.Op {
	case OpSend:
		c.Body = d.Bytes(MaxBody)
		n := d.Uvarint()
		if n > MaxAttrs {
			return c, fmt.Errorf("%w: %d attributes (max %d)", ErrBadCommand, n, MaxAttrs)
		}
		for i := uint64(0); i < n && d.Err == nil; i++ {
			c.Attrs = append(c.Attrs, Attr{Key: string(d.Bytes(MaxString)), Value: string(d.Bytes(MaxString))})
		}
		c.Delay = d.duration()
	case OpReceive:
		n := d.Uvarint()
		if n == 0 || n > MaxReceive {
			d.Fail("receive max %d (1..%d)", n, MaxReceive)
		}
		c.Max = int(n)
		c.Timeout = d.duration()
	case OpAck:
		c.Receipt = string(d.Bytes(MaxString))
	case OpNack:
		c.Receipt = string(d.Bytes(MaxString))
		c.Delay = d.duration()
	case OpExtend:
		c.Receipt = string(d.Bytes(MaxString))
		c.Timeout = d.duration()
	default:
		if !c.decodeMore(&d) {
			return c, fmt.Errorf("%w: unknown op %d", ErrBadCommand, c.Op)
		}
	}
	d.Done()
	return c, d.Err
}

// decoder is wire.Decoder with the queue's own readers (durations, snapshot.go).
type decoder struct{ wire.Decoder }

// duration is a non-negative varint of nanoseconds.
func (d *decoder) duration() time.Duration {
	v := d.Varint()
	if v < 0 || v == math.MaxInt64 {
		d.Fail("duration %d out of range", v)
		return 0
	}
	return time.Duration(v)
}
