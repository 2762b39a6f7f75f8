package broker

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"time"
	"unicode/utf8"
)

// A replicated queue message's body is an envelope: the attributes a single node keeps in
// record headers travel in the replicated body instead, so one Raft entry carries the
// whole message and replqueue's per-attribute limits never apply.
//
//	version(1)=1 nattrs(uvarint) {name(bytes) type(bytes) value(bytes)}... by name
//	nsystem(uvarint) {key(bytes) value(bytes)}... by key, then the body (the rest)
//
// bytes is a uvarint length then the bytes.
const envelopeVersion = 1

var errBadEnvelope = errors.New("malformed replicated message envelope")

func encodeEnvelope(attrs map[string]Attribute, sys map[string]string, body []byte) []byte {
	n := 8 + len(body)
	for k, a := range attrs {
		n += len(k) + len(a.DataType) + len(a.Value) + 9
	}
	b := make([]byte, 0, n)
	b = append(b, envelopeVersion)
	b = binary.AppendUvarint(b, uint64(len(attrs)))
	for _, k := range sortedKeys(attrs) {
		b = appendEnvBytes(b, []byte(k))
		b = appendEnvBytes(b, []byte(attrs[k].DataType))
		b = appendEnvBytes(b, attrs[k].Value)
	}
	b = binary.AppendUvarint(b, uint64(len(sys)))
	for _, k := range sortedKeys(sys) {
		b = appendEnvBytes(b, []byte(k))
		b = appendEnvBytes(b, []byte(sys[k]))
	}
	return append(b, body...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendEnvBytes(b, v []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }

// decodeEnvelope parses an envelope; the body aliases b. Nil maps when there are none.
func decodeEnvelope(b []byte) (map[string]Attribute, map[string]string, []byte, error) {
	if len(b) == 0 || b[0] != envelopeVersion {
		return nil, nil, nil, errBadEnvelope
	}
	d := envDecoder{b: b[1:], ok: true}
	var attrs map[string]Attribute
	if n := d.count(); n > 0 {
		attrs = make(map[string]Attribute, n)
		for i := uint64(0); i < n && d.ok; i++ {
			k, t, v := string(d.bytes()), string(d.bytes()), d.bytes()
			attrs[k] = Attribute{DataType: t, Value: v}
		}
	}
	var sys map[string]string
	if n := d.count(); n > 0 {
		sys = make(map[string]string, n)
		for i := uint64(0); i < n && d.ok; i++ {
			k, v := string(d.bytes()), string(d.bytes())
			sys[k] = v
		}
	}
	if !d.ok {
		return nil, nil, nil, errBadEnvelope
	}
	return attrs, sys, d.b, nil
}

type envDecoder struct {
	b  []byte
	ok bool
}

func (d *envDecoder) uvarint() uint64 {
	if !d.ok {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.ok = false
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items of at least two bytes each: never more than that allows.
func (d *envDecoder) count() uint64 {
	n := d.uvarint()
	if !d.ok || n > uint64(len(d.b))/2 {
		d.ok = false
		return 0
	}
	return n
}

func (d *envDecoder) bytes() []byte {
	n := d.uvarint()
	if !d.ok || n > uint64(len(d.b)) {
		d.ok = false
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// A dead-letter or redriven copy keeps the message's id and where it died: its body is the
// original envelope behind a copy header,
//
//	version(1)=2 id(bytes) source(bytes) receiveCount(uvarint), then the version 1 envelope
//	version(1)=3 id(bytes) source(bytes) receiveCount(uvarint) sentAt(uvarint)
//	             firstReceive(uvarint) lastReceive(uvarint) reason(bytes), then the envelope
//
// (times in unix milliseconds, 0 unknown), and a copy of a copy replaces the header rather
// than nest another. Version 3 carries the dead letter's history, as a single node's
// dead-letter record does: the original send time (which SentTimestamp reports, not the
// time of the move), the first and last receive, the last nack reason. It is written only
// once the cluster's feature level is meta.LevelDeadLetterHistory: an older build reads a
// version 3 copy as an envelope it cannot decode.
const (
	copyVersion        = 2
	copyVersionHistory = 3
)

// copyReserve bounds a copy header: a message id (36), a queue name (at most 80 bytes), a
// count, three times, a reason cut to copyReasonMax, and their lengths, with room to spare.
const copyReserve = 512

// copyReasonMax bounds the nack reason a copy header carries (a nack's may be 1 KiB): the
// header must stay within copyReserve, which every send left free.
const copyReasonMax = 200

type copyHeader struct {
	id     string
	source string // the queue it was dead-lettered from ("": a redriven copy)
	count  int
	// history: written as version 3 (the cluster's level admits it), with what follows.
	history                 bool
	sentAt, firstAt, lastAt time.Time // zero: unknown
	reason                  string
}

func wrapCopy(h copyHeader, env []byte) []byte {
	if _, inner, err := unwrapCopy(env); err == nil {
		env = inner
	}
	b := make([]byte, 0, len(env)+len(h.id)+len(h.source)+len(h.reason)+48)
	version := byte(copyVersion)
	if h.history {
		version = copyVersionHistory
	}
	b = append(b, version)
	b = appendEnvBytes(b, []byte(h.id))
	b = appendEnvBytes(b, []byte(h.source))
	b = binary.AppendUvarint(b, uint64(h.count))
	if h.history {
		for _, t := range []time.Time{h.sentAt, h.firstAt, h.lastAt} {
			b = binary.AppendUvarint(b, unixMilli(t))
		}
		b = appendEnvBytes(b, []byte(clipUTF8(h.reason, copyReasonMax)))
	}
	return append(b, env...)
}

// unixMilli is t in unix milliseconds, 0 for the zero time (or one before 1970).
func unixMilli(t time.Time) uint64 {
	if t.IsZero() || t.UnixMilli() <= 0 {
		return 0
	}
	return uint64(t.UnixMilli())
}

// fromUnixMilli is unixMilli's inverse (0: the zero time).
func fromUnixMilli(ms uint64) time.Time {
	if ms == 0 || ms > math.MaxInt64 {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms))
}

// clipUTF8 cuts s to at most n bytes, not inside a UTF-8 sequence.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// unwrapCopy splits a copy's header from its envelope; a message that is no copy has an
// empty header.
func unwrapCopy(b []byte) (copyHeader, []byte, error) {
	if len(b) == 0 || (b[0] != copyVersion && b[0] != copyVersionHistory) {
		return copyHeader{}, b, nil
	}
	d := envDecoder{b: b[1:], ok: true}
	h := copyHeader{id: string(d.bytes()), source: string(d.bytes())}
	n := d.uvarint()
	if b[0] == copyVersionHistory {
		h.history = true
		h.sentAt, h.firstAt, h.lastAt = fromUnixMilli(d.uvarint()), fromUnixMilli(d.uvarint()), fromUnixMilli(d.uvarint())
		h.reason = string(d.bytes())
	}
	if !d.ok || n > 1<<31 || len(d.b) == 0 || d.b[0] != envelopeVersion {
		return copyHeader{}, nil, errBadEnvelope
	}
	h.count = int(n)
	return h, d.b, nil
}
