package replqueue

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// Msg is one message of a Put.
type Msg struct {
	Body  []byte
	Attrs []Attr
	Delay time.Duration
	// Group is the FIFO message group ("" in a standard queue): the cursor delivers one
	// message of a group at a time, in offset order.
	Group string
	// DedupID is stored with the message and handed back on delivery (what the client
	// sent; the machine never reads it).
	DedupID string
	// Key deduplicates: a Put of a key remembered within the window stores nothing and
	// answers the original offset. "" never deduplicates. The broker derives it from the
	// deduplication id (and the group, by the queue's scope), or from the source of a
	// dead-letter or redrive copy, so a copy retried after a failover is stored once.
	Key string
}

// PutOutcome is what a Put did with one message.
type PutOutcome struct {
	Offset    int64 // the message's offset, or the original's for a duplicate
	Duplicate bool  // the key was remembered: nothing was stored
}

// appendMsg: body(bytes) nattrs(uvarint) {key(bytes) value(bytes)}... delay(varint ns)
// group(bytes) dedupID(bytes) key(bytes)
func appendMsg(b []byte, m *Msg) []byte {
	b = appendBytes(b, m.Body)
	attrs := slices.Clone(m.Attrs)
	slices.SortFunc(attrs, func(x, y Attr) int { return cmpString(x.Key, y.Key) })
	b = binary.AppendUvarint(b, uint64(len(attrs)))
	for _, a := range attrs {
		b = appendBytes(b, []byte(a.Key))
		b = appendBytes(b, []byte(a.Value))
	}
	b = binary.AppendVarint(b, int64(m.Delay))
	b = appendBytes(b, []byte(m.Group))
	b = appendBytes(b, []byte(m.DedupID))
	return appendBytes(b, []byte(m.Key))
}

func (d *decoder) msg() Msg {
	var m Msg
	m.Body = d.Bytes(MaxBody)
	n := d.Uvarint()
	if n > MaxAttrs {
		d.Fail("%d attributes (max %d)", n, MaxAttrs)
		return m
	}
	for i := uint64(0); i < n && d.Err == nil; i++ {
		m.Attrs = append(m.Attrs, Attr{Key: string(d.Bytes(MaxString)), Value: string(d.Bytes(MaxString))})
	}
	m.Delay = d.duration()
	m.Group = string(d.Bytes(MaxString))
	m.DedupID = string(d.Bytes(MaxString))
	m.Key = string(d.Bytes(MaxString))
	return m
}

// encodeMore encodes the ops added after the first five.
func (c *Command) encodeMore(b []byte) []byte {
	switch c.Op {
	case OpPut:
		b = binary.AppendVarint(b, int64(c.Window))
		b = binary.AppendUvarint(b, uint64(len(c.Msgs)))
		for i := range c.Msgs {
			b = appendMsg(b, &c.Msgs[i])
		}
	case OpReceiveLimited:
		b = binary.AppendUvarint(b, uint64(c.Max))
		b = binary.AppendVarint(b, int64(c.Timeout))
		b = binary.AppendUvarint(b, uint64(c.MaxReceives))
	case OpDeadDone:
		b = binary.AppendUvarint(b, uint64(len(c.Offsets)))
		for _, off := range c.Offsets {
			b = binary.AppendUvarint(b, uint64(off))
		}
	case OpPurge:
	case OpConfigure:
		for _, t := range []time.Duration{c.Times.Visibility, c.Times.MaxExtension, c.Times.Retention} {
			b = binary.AppendVarint(b, int64(t))
		}
	case OpNackReason:
		b = appendBytes(b, []byte(c.Receipt))
		b = binary.AppendVarint(b, int64(c.Delay))
		b = appendBytes(b, []byte(c.Reason))
	}
	return b
}

// decodeMore decodes the ops added after the first five; false: an unknown op.
func (c *Command) decodeMore(d *decoder) bool {
	switch c.Op {
	case OpPut:
		c.Window = d.duration()
		n := d.Uvarint()
		if d.Err == nil && (n == 0 || n > MaxPut) {
			d.Fail("put of %d messages (1..%d)", n, MaxPut)
		}
		for i := uint64(0); i < n && d.Err == nil; i++ {
			c.Msgs = append(c.Msgs, d.msg())
		}
	case OpReceiveLimited:
		n := d.Uvarint()
		if n == 0 || n > MaxReceive {
			d.Fail("receive max %d (1..%d)", n, MaxReceive)
		}
		c.Max = int(n)
		c.Timeout = d.duration()
		lim := d.Uvarint()
		if d.Err == nil && (lim == 0 || lim > queue.MaxReceivesLimit) {
			d.Fail("receive limit %d (1..%d)", lim, queue.MaxReceivesLimit)
		}
		c.MaxReceives = int(lim)
	case OpDeadDone:
		n := d.Uvarint()
		if d.Err == nil && (n == 0 || n > MaxPut) {
			d.Fail("%d offsets (1..%d)", n, MaxPut)
		}
		for i := uint64(0); i < n && d.Err == nil; i++ {
			off := d.Uvarint()
			if off > 1<<62 {
				d.Fail("offset %d", off)
			}
			c.Offsets = append(c.Offsets, int64(off))
		}
	case OpPurge:
	case OpConfigure:
		c.Times = Times{Visibility: d.duration(), MaxExtension: d.duration(), Retention: d.duration()}
	case OpNackReason:
		c.Receipt = string(d.Bytes(MaxString))
		c.Delay = d.duration()
		c.Reason = string(d.Bytes(queue.MaxReasonLen))
	default:
		return false
	}
	return true
}
