package group

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// decoder reads the event encoding; the first error sticks, so callers
// check once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorruptEvent, what)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint(limit uint64, what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	// Overlong encodings are refused so that every event has exactly one
	// encoding (the fuzz target checks decode-encode gives the input back).
	if n <= 0 || v > limit || n != len(binary.AppendUvarint(nil, v)) {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(lo, hi int64, what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || v < lo || v > hi || n != len(binary.AppendVarint(nil, v)) {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string(what string) string {
	n := d.uvarint(math.MaxInt32, what+" length")
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail(what + " overruns the event")
	}
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// minOffsetSize is the fewest bytes one encoded offset can take (five
// one-byte fields); it bounds the count a corrupt header can claim.
const minOffsetSize = 5

// UnmarshalEvent decodes an event written by MarshalBinary. Any other
// input yields an error wrapping ErrCorruptEvent, never a panic and never
// an allocation larger than the input justifies.
func UnmarshalEvent(data []byte) (Event, error) {
	d := &decoder{b: data}
	version := d.byte()
	if d.err == nil && version != eventVersion && version != eventVersionSigned {
		return Event{}, fmt.Errorf("%w: version %d", ErrCorruptEvent, version)
	}
	ev := Event{Type: EventType(d.byte())}
	ev.Group = d.string("group")
	if ev.Type == EventGroupProtocol || ev.Type == EventGroupMembers {
		ev.ProtocolType = d.string("protocol type")
		ev.Mode = AssignMode(d.byte())
	}
	if ev.Type == EventGroupMembers {
		if version != eventVersion {
			return Event{}, fmt.Errorf("%w: version %d for a membership record", ErrCorruptEvent, version)
		}
		ev.Members = d.members()
	}
	if ev.Type == EventConsumerMembers && d.err == nil {
		if version != eventVersion {
			return Event{}, fmt.Errorf("%w: version %d for a consumer record", ErrCorruptEvent, version)
		}
		ev.Consumer = &ConsumerMembership{raw: append([]byte(nil), d.b...)}
		d.b = nil
	}
	if ev.Type == EventOffsetsCommitted || ev.Type == EventOffsetsDeleted {
		ev.Time = time.UnixMilli(d.varint(math.MinInt64/2, math.MaxInt64/2, "time"))
		n := d.uvarint(uint64(len(d.b)/minOffsetSize), "offset count")
		if d.err == nil {
			ev.Offsets = make([]CommittedOffset, 0, n)
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			var o CommittedOffset
			o.Topic = d.string("topic")
			o.Partition = int32(d.uvarint(math.MaxInt32, "partition"))
			if version == eventVersionSigned {
				o.Offset = d.varint(MinCommitOffset, math.MaxInt64, "offset")
			} else {
				o.Offset = int64(d.uvarint(math.MaxInt64, "offset"))
			}
			o.LeaderEpoch = int32(d.varint(math.MinInt32, math.MaxInt32, "leader epoch"))
			o.Metadata = d.string("metadata")
			o.CommitTime = ev.Time
			ev.Offsets = append(ev.Offsets, o)
		}
	}
	if d.err != nil {
		return Event{}, d.err
	}
	if len(d.b) != 0 {
		return Event{}, fmt.Errorf("%w: %d trailing bytes", ErrCorruptEvent, len(d.b))
	}
	if err := ev.validate(); err != nil {
		return Event{}, err
	}
	if (version == eventVersionSigned) != ev.signed() {
		return Event{}, fmt.Errorf("%w: version %d for these offsets", ErrCorruptEvent, version)
	}
	return ev, nil
}
