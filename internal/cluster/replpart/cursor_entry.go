package replpart

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/wire"
)

// cursorVersion is the first byte of a subscription cursor's entry (entryVersion is a
// produce's).
const cursorVersion = 2

// Cursor entry kinds beside replcursor's Receive, Ack, Nack and Extend.
const (
	CursorCreate replcursor.Kind = 1
	CursorDelete replcursor.Kind = 6
	// CursorReceiveLimited is a Receive that moves a record received more than Limit
	// times to the cursor's dead letters instead of delivering it (cursor_dead.go).
	CursorReceiveLimited replcursor.Kind = 7
	// CursorDeadDone drops dead letters whose copy in the dead-letter queue is committed.
	CursorDeadDone replcursor.Kind = 8
	// CursorSkipTo moves the cursor's start forward to To, finishing every record below it
	// (cursor_skip.go): a Kafka share group's AlterShareGroupOffsets.
	CursorSkipTo replcursor.Kind = 9
	// CursorDeadLetter finishes the delivery a receipt names (Op.Receipt) and keeps it
	// among the cursor's dead letters, for its copy to a dead-letter queue: a Kafka share
	// group's reject, or release at its delivery limit, with a dead-letter queue set.
	CursorDeadLetter replcursor.Kind = 10
)

// Limits of the dead-letter entries.
const (
	MaxReceiveLimit = 1000 // a limited Receive's limit: SQS's maxReceiveCount is 1..1000
	MaxDeadDone     = 1000 // offsets of one DeadDone
)

// CursorConfig is a subscription's cursor in one partition: what every replica builds the
// same cursor from.
type CursorConfig struct {
	Queue        queue.Config  // Visibility, MaxExtension, Retention, Lookahead, FIFO; MaxReceives must be 0
	Delay        time.Duration // delivery delay from each record's timestamp
	FromEarliest bool          // start at the log's start (else at its end when the create applies)
}

// CursorEntry is one cursor event of a subscription (Sub, the catalog's id) in a
// partition's group, beside the produces: a create or delete of the subscription's cursor,
// or a replcursor command on it.
type CursorEntry struct {
	Origin  uint64
	Request uint64
	Now     time.Time // the proposer's clock (clamped in apply)
	Sub     uint64
	Kind    replcursor.Kind
	Op      replcursor.Op // Receive, Ack, Nack, Extend; ReceiveLimited's receive
	Config  CursorConfig  // Create
	Limit   int           // ReceiveLimited: 1..MaxReceiveLimit
	Offsets []int64       // DeadDone: 1..MaxDeadDone
	To      int64         // SkipTo: the new start, >= 0
}

// Encode appends e's encoding to b:
//
//	version(1)=2 origin(uvarint) request(uvarint) now(varint unix ns) sub(uvarint) kind(1), then
//	Create   visibility maxextension retention delay(varint ns each) lookahead(uvarint) flags(1: 1 FIFO, 2 from earliest)
//	Delete   nothing
//	ReceiveLimited  a Receive's fields, then limit(uvarint)
//	DeadDone count(uvarint) {offset(uvarint)}...
//	SkipTo   to(uvarint)
//	DeadLetter  an Ack's fields (the receipt)
//	others   replcursor.Op's fields
func (e *CursorEntry) Encode(b []byte) []byte {
	b = append(b, cursorVersion)
	b = binary.AppendUvarint(b, e.Origin)
	b = binary.AppendUvarint(b, e.Request)
	b = binary.AppendVarint(b, e.Now.UnixNano())
	b = binary.AppendUvarint(b, e.Sub)
	b = append(b, byte(e.Kind))
	switch e.Kind {
	case CursorCreate:
		b = appendCursorConfig(b, e.Config)
	case CursorDelete:
	case CursorReceiveLimited:
		op := e.Op
		op.Kind = replcursor.Receive
		b = op.Append(b)
		b = binary.AppendUvarint(b, uint64(e.Limit))
	case CursorDeadDone:
		b = binary.AppendUvarint(b, uint64(len(e.Offsets)))
		for _, off := range e.Offsets {
			b = binary.AppendUvarint(b, uint64(off))
		}
	case CursorSkipTo:
		b = binary.AppendUvarint(b, uint64(e.To))
	case CursorDeadLetter:
		op := e.Op
		op.Kind = replcursor.Ack
		b = op.Append(b)
	default:
		op := e.Op
		op.Kind = e.Kind
		b = op.Append(b)
	}
	return b
}

func appendCursorConfig(b []byte, c CursorConfig) []byte {
	q := c.Queue
	for _, d := range []time.Duration{q.Visibility, q.MaxExtension, q.Retention, c.Delay} {
		b = binary.AppendVarint(b, int64(d))
	}
	b = binary.AppendUvarint(b, uint64(q.Lookahead))
	var flags byte
	if q.FIFO {
		flags |= 1
	}
	if c.FromEarliest {
		flags |= 2
	}
	return append(b, flags)
}

// decodeCursor parses a cursor entry (b[0] == cursorVersion). Any malformed input is
// ErrBadEntry.
func decodeCursor(b []byte) (CursorEntry, error) {
	var e CursorEntry
	d := wire.Decoder{B: b[1:], Bad: ErrBadEntry}
	e.Origin = d.Uvarint()
	e.Request = d.Uvarint()
	e.Now = time.Unix(0, d.Varint()).UTC()
	e.Sub = d.Uvarint()
	kind, ok := readByte(&d)
	if !ok {
		return e, d.Err
	}
	e.Kind = replcursor.Kind(kind)
	switch {
	case e.Kind == CursorCreate:
		e.Config = readCursorConfig(&d)
	case e.Kind == CursorDelete:
	case e.Kind == CursorReceiveLimited:
		e.Op = replcursor.Read(&d, replcursor.Receive)
		if n := d.Uvarint(); d.Err == nil && (n == 0 || n > MaxReceiveLimit) {
			d.Fail("receive limit %d (1..%d)", n, MaxReceiveLimit)
		} else {
			e.Limit = int(n)
		}
	case e.Kind == CursorDeadDone:
		n := d.Uvarint()
		if d.Err == nil && (n == 0 || n > MaxDeadDone) {
			d.Fail("%d dead letters done (1..%d)", n, MaxDeadDone)
			n = 0
		}
		for range n {
			off := d.Uvarint()
			if d.Err != nil {
				break
			}
			if off > math.MaxInt64 {
				d.Fail("offset %d", off)
				break
			}
			e.Offsets = append(e.Offsets, int64(off))
		}
	case e.Kind == CursorSkipTo:
		to := d.Uvarint()
		if d.Err == nil && to > math.MaxInt64 {
			d.Fail("skip to offset %d", to)
		}
		e.To = int64(to)
	case e.Kind == CursorDeadLetter:
		e.Op = replcursor.Read(&d, replcursor.Ack)
	case replcursor.Known(e.Kind):
		e.Op = replcursor.Read(&d, e.Kind)
	default:
		d.Fail("unknown cursor entry kind %d", kind)
	}
	d.Done()
	return e, d.Err
}

func readCursorConfig(d *wire.Decoder) CursorConfig {
	var c CursorConfig
	c.Queue.Visibility = replcursor.Duration(d)
	c.Queue.MaxExtension = replcursor.Duration(d)
	c.Queue.Retention = replcursor.Duration(d)
	c.Delay = replcursor.Duration(d)
	n := d.Uvarint()
	if n > queue.MaxLookahead {
		d.Fail("lookahead %d (max %d)", n, queue.MaxLookahead)
	}
	c.Queue.Lookahead = int(n)
	flags, ok := readByte(d)
	if ok && flags&^3 != 0 {
		d.Fail("cursor flags %#x", flags)
	}
	c.Queue.FIFO, c.FromEarliest = flags&1 != 0, flags&2 != 0
	return c
}

func readByte(d *wire.Decoder) (byte, bool) {
	if d.Err != nil {
		return 0, false
	}
	if len(d.B) == 0 {
		d.Fail("truncated")
		return 0, false
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v, true
}

// checkCursorEntry refuses, before proposing, an entry every replica would refuse to
// decode (and so stop the group on) or a config no cursor can have.
func checkCursorEntry(e *CursorEntry) error {
	switch e.Kind {
	case CursorCreate:
		if e.Config.Queue.MaxReceives != 0 {
			return ErrCursorDeadLetter
		}
		if e.Config.Delay < 0 || e.Config.Queue.Lookahead > queue.MaxLookahead {
			return fmt.Errorf("%w: cursor delay %v, lookahead %d", ErrBadAppend, e.Config.Delay, e.Config.Queue.Lookahead)
		}
		return e.Config.Queue.Validate()
	case CursorDelete:
		return nil
	case CursorReceiveLimited:
		op := e.Op
		op.Kind = replcursor.Receive
		if !op.Check() || e.Limit < 1 || e.Limit > MaxReceiveLimit {
			return fmt.Errorf("%w: limited receive %+v, limit %d", ErrBadAppend, op, e.Limit)
		}
		return nil
	case CursorDeadDone:
		if len(e.Offsets) == 0 || len(e.Offsets) > MaxDeadDone || slices.Min(e.Offsets) < 0 {
			return fmt.Errorf("%w: %d dead letters done", ErrBadAppend, len(e.Offsets))
		}
		return nil
	case CursorSkipTo:
		if e.To < 0 {
			return fmt.Errorf("%w: skip to offset %d", ErrBadAppend, e.To)
		}
		return nil
	case CursorDeadLetter:
		op := e.Op
		op.Kind = replcursor.Ack
		if !op.Check() {
			return fmt.Errorf("%w: dead letter %+v", ErrBadAppend, op)
		}
		return nil
	}
	op := e.Op
	op.Kind = e.Kind
	if !op.Check() {
		return fmt.Errorf("%w: cursor command %+v", ErrBadAppend, op)
	}
	return nil
}
