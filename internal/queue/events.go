package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Event is one journaled change of a cursor. Every mutating call returns its events; the
// broker appends them to the queue's journal before answering, and Apply replays them.
type Event interface {
	// AppendBinary appends the encoding (see the package doc) to b.
	AppendBinary(b []byte) ([]byte, error)
	MarshalBinary() ([]byte, error)
	kind() byte
}

// Delivered: a receive handed the message out (again). Carries what a replay needs to rebuild
// the message without re-reading it: its group and send time.
type Delivered struct {
	Offset   int64
	Token    uint64
	Count    int
	At       time.Time // receive time; the extension bound counts from here
	Deadline time.Time
	FirstAt  time.Time
	SentAt   time.Time
	GroupID  string
}

// Acked: the current holder finished the message.
type Acked struct{ Offset int64 }

// Extended: a heartbeat moved the visibility deadline.
type Extended struct {
	Offset   int64
	Deadline time.Time
}

// Nacked: the holder released the message, visible again at AvailableAt.
type Nacked struct {
	Offset      int64
	AvailableAt time.Time
	Reason      string
}

// DeadLettered: the message used up its receives. It is also the outcome the broker turns into
// a dead-letter copy (with the body and attributes it reads from the log).
type DeadLettered struct {
	Offset  int64
	Count   int
	FirstAt time.Time
	LastAt  time.Time
	SentAt  time.Time
	GroupID string
	Reason  string // last nack reason, if any
}

// Expired: messages in [From, To) were dropped for being older than retention.
type Expired struct{ From, To int64 }

// Purged: everything below UpTo is finished.
type Purged struct{ UpTo int64 }

// Skipped: offsets in [From, To) hold no message for this cursor.
type Skipped struct{ From, To int64 }

const (
	evDelivered byte = iota + 1
	evAcked
	evExtended
	evNacked
	evDeadLettered
	evExpired
	evPurged
	evSkipped
)

func (Delivered) kind() byte    { return evDelivered }
func (Acked) kind() byte        { return evAcked }
func (Extended) kind() byte     { return evExtended }
func (Nacked) kind() byte       { return evNacked }
func (DeadLettered) kind() byte { return evDeadLettered }
func (Expired) kind() byte      { return evExpired }
func (Purged) kind() byte       { return evPurged }
func (Skipped) kind() byte      { return evSkipped }

func (e Delivered) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, evDelivered)
	b = binary.AppendUvarint(b, uint64(e.Offset))
	b = binary.AppendUvarint(b, e.Token)
	b = binary.AppendUvarint(b, uint64(e.Count))
	b = appendTimes(b, e.At, e.Deadline, e.FirstAt, e.SentAt)
	return appendString(b, e.GroupID), nil
}

func (e Acked) AppendBinary(b []byte) ([]byte, error) {
	return binary.AppendUvarint(append(b, evAcked), uint64(e.Offset)), nil
}

func (e Extended) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendUvarint(append(b, evExtended), uint64(e.Offset))
	return appendTimes(b, e.Deadline), nil
}

func (e Nacked) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendUvarint(append(b, evNacked), uint64(e.Offset))
	b = appendTimes(b, e.AvailableAt)
	return appendString(b, e.Reason), nil
}

func (e DeadLettered) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendUvarint(append(b, evDeadLettered), uint64(e.Offset))
	b = binary.AppendUvarint(b, uint64(e.Count))
	b = appendTimes(b, e.FirstAt, e.LastAt, e.SentAt)
	return appendString(appendString(b, e.GroupID), e.Reason), nil
}

// Ranges are stored as start and length, so a long range costs as few bytes as a short one.
func (e Expired) AppendBinary(b []byte) ([]byte, error) {
	return appendRange(b, evExpired, e.From, e.To)
}
func (e Skipped) AppendBinary(b []byte) ([]byte, error) {
	return appendRange(b, evSkipped, e.From, e.To)
}

func (e Purged) AppendBinary(b []byte) ([]byte, error) {
	return binary.AppendUvarint(append(b, evPurged), uint64(e.UpTo)), nil
}

func (e Delivered) MarshalBinary() ([]byte, error)    { return e.AppendBinary(nil) }
func (e Acked) MarshalBinary() ([]byte, error)        { return e.AppendBinary(nil) }
func (e Extended) MarshalBinary() ([]byte, error)     { return e.AppendBinary(nil) }
func (e Nacked) MarshalBinary() ([]byte, error)       { return e.AppendBinary(nil) }
func (e DeadLettered) MarshalBinary() ([]byte, error) { return e.AppendBinary(nil) }
func (e Expired) MarshalBinary() ([]byte, error)      { return e.AppendBinary(nil) }
func (e Skipped) MarshalBinary() ([]byte, error)      { return e.AppendBinary(nil) }
func (e Purged) MarshalBinary() ([]byte, error)       { return e.AppendBinary(nil) }

func appendTimes(b []byte, ts ...time.Time) []byte {
	for _, t := range ts {
		b = binary.AppendVarint(b, tn(t))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendRange(b []byte, k byte, from, to int64) ([]byte, error) {
	if from < 0 || to < from {
		return nil, fmt.Errorf("queue: bad range [%d, %d)", from, to)
	}
	b = binary.AppendUvarint(append(b, k), uint64(from))
	return binary.AppendUvarint(b, uint64(to-from)), nil
}

// ErrBadEvent is returned for an undecodable event, or one that does not fit the cursor's
// state in Apply (a journal that does not belong to this snapshot, or corruption).
var ErrBadEvent = errors.New("queue: bad event")

// decoder reads the fields of one event; the first error sticks, so callers check once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadEvent, what)
	}
}

func (d *decoder) uvarint(limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > limit {
		d.fail("integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) offset() int64 { return int64(d.uvarint(math.MaxInt64)) }
func (d *decoder) count() int    { return int(d.uvarint(math.MaxInt32)) }

func (d *decoder) time() time.Time {
	if d.err != nil {
		return time.Time{}
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("time")
		return time.Time{}
	}
	d.b = d.b[n:]
	return nt(v)
}

func (d *decoder) string() string {
	n := d.uvarint(math.MaxUint64)
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("string length")
	}
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) rangeEnd(from int64) int64 {
	n := d.uvarint(uint64(math.MaxInt64 - from))
	return from + int64(n)
}

// UnmarshalEvent decodes one event. Any input that is not exactly one well-formed event yields
// an error wrapping ErrBadEvent; it never panics.
func UnmarshalEvent(b []byte) (Event, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrBadEvent)
	}
	d := &decoder{b: b[1:]}
	var ev Event
	switch b[0] {
	case evDelivered:
		e := Delivered{Offset: d.offset(), Token: d.uvarint(math.MaxUint64), Count: d.count()}
		e.At, e.Deadline, e.FirstAt, e.SentAt = d.time(), d.time(), d.time(), d.time()
		e.GroupID = d.string()
		ev = e
	case evAcked:
		ev = Acked{Offset: d.offset()}
	case evExtended:
		ev = Extended{Offset: d.offset(), Deadline: d.time()}
	case evNacked:
		ev = Nacked{Offset: d.offset(), AvailableAt: d.time(), Reason: d.string()}
	case evDeadLettered:
		e := DeadLettered{Offset: d.offset(), Count: d.count()}
		e.FirstAt, e.LastAt, e.SentAt = d.time(), d.time(), d.time()
		e.GroupID, e.Reason = d.string(), d.string()
		ev = e
	case evExpired:
		from := d.offset()
		ev = Expired{From: from, To: d.rangeEnd(from)}
	case evSkipped:
		from := d.offset()
		ev = Skipped{From: from, To: d.rangeEnd(from)}
	case evPurged:
		ev = Purged{UpTo: d.offset()}
	default:
		return nil, fmt.Errorf("%w: kind %d", ErrBadEvent, b[0])
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return ev, nil
}
