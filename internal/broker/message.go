package broker

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// Message is what a producer sends to a queue and a consumer receives.
type Message struct {
	ID         string               // assigned at send; kept through dead-lettering and redrive
	Body       []byte               // opaque
	Attributes map[string]Attribute // user attributes (SQS message attributes, native headers)
	// System attributes a protocol carries through (e.g. SQS AWSTraceHeader).
	System map[string]string

	GroupID string // FIFO queues: order is kept per group
	DedupID string // FIFO queues: repeats within the dedup window are dropped

	SentAt      time.Time // when the broker stored it
	AvailableAt time.Time // SentAt plus the delay; zero when not delayed

	// Set on messages that reached a dead-letter queue (and kept by redrive).
	DeadLetter *DeadLetterInfo
}

// Attribute is one user attribute: a type name (for SQS: String, Number,
// Binary, with an optional ".custom" suffix; for the native API "bytes") and
// its value.
type Attribute struct {
	DataType string
	Value    []byte
}

// DeadLetterInfo says where a dead-lettered message came from and why.
type DeadLetterInfo struct {
	SourceQueue    string
	ReceiveCount   int
	FirstReceiveAt time.Time
	LastReceiveAt  time.Time
	Reason         string    // the last nack reason, if any
	At             time.Time // when it was moved to the dead-letter queue (zero: not known)
}

// newMessageID returns a random UUID (version 4), the form SQS clients expect.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (Go 1.24+ panics instead of returning an error)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte // 8-4-4-4-12 hex digits built in place: one allocation, not two
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}

// Header keys of a queue message's record. Everything sluice adds starts
// with "sluice." so a Kafka consumer reading the same log can tell ours from
// user attributes, which start with "a." (data type, NUL, value).
const (
	hdrID          = "sluice.id"
	hdrGroup       = "sluice.group"
	hdrDedup       = "sluice.dedup"
	hdrAvailableAt = "sluice.available-at" // unix milliseconds
	hdrSentAt      = "sluice.sent-at"      // original send time, kept by dead-lettering and redrive
	hdrDLSource    = "sluice.dl.source"
	hdrDLCount     = "sluice.dl.receive-count"
	hdrDLFirst     = "sluice.dl.first-receive"
	hdrDLLast      = "sluice.dl.last-receive"
	hdrDLReason    = "sluice.dl.reason"
	prefixAttr     = "a."
	prefixSystem   = "s."
)

// encodeHeaders turns a message's metadata into record headers.
//
// The values of the id, the group and dedup ids, the attributes and the
// system attributes are cut from one buffer and the attributes' keys come
// from keyCache: a copy, and for a key a concatenation, each was an
// allocation a message on every send (8 % of the objects the server
// allocated under W2 over SQS). The headers live only until the batch is
// built from them.
func encodeHeaders(m *Message) []batch.RecordHeader {
	h := make([]batch.RecordHeader, 0, 4+len(m.Attributes)+len(m.System))
	a := valueArena(make([]byte, 0, headerValueBytes(m)))
	h = append(h, hdr(hdrID, a.add(m.ID)))
	if m.GroupID != "" {
		h = append(h, hdr(hdrGroup, a.add(m.GroupID)))
	}
	if m.DedupID != "" {
		h = append(h, hdr(hdrDedup, a.add(m.DedupID)))
	}
	if !m.AvailableAt.IsZero() {
		h = append(h, hdr(hdrAvailableAt, msBytes(m.AvailableAt)))
	}
	if dl := m.DeadLetter; dl != nil {
		h = append(h,
			hdr(hdrSentAt, msBytes(m.SentAt)),
			hdr(hdrDLSource, []byte(dl.SourceQueue)),
			hdr(hdrDLCount, []byte(strconv.Itoa(dl.ReceiveCount))),
			hdr(hdrDLFirst, msBytes(dl.FirstReceiveAt)),
			hdr(hdrDLLast, msBytes(dl.LastReceiveAt)),
		)
		if dl.Reason != "" {
			h = append(h, hdr(hdrDLReason, []byte(dl.Reason)))
		}
	}
	for name, at := range m.Attributes {
		h = append(h, hdr(headerKeys.key(prefixAttr, name), a.attr(at)))
	}
	for name, v := range m.System {
		h = append(h, hdr(headerKeys.key(prefixSystem, name), a.add(v)))
	}
	return h
}

// decodeHeaders fills m from record headers; unknown keys are ignored so
// that records written by a newer sluice or a Kafka producer still read.
// sentAt is the record's timestamp.
func decodeHeaders(m *Message, hs []batch.RecordHeader, sentAt time.Time) {
	m.SentAt = sentAt
	var dl DeadLetterInfo
	for _, h := range hs {
		switch {
		case h.Key == hdrID:
			m.ID = string(h.Value)
		case h.Key == hdrGroup:
			m.GroupID = string(h.Value)
		case h.Key == hdrDedup:
			m.DedupID = string(h.Value)
		case h.Key == hdrAvailableAt:
			m.AvailableAt = msTime(h.Value)
		case h.Key == hdrSentAt:
			m.SentAt = msTime(h.Value)
		case h.Key == hdrDLSource:
			dl.SourceQueue = string(h.Value)
			dl.At = sentAt // the record is the copy: its timestamp is when it was moved
			m.DeadLetter = &dl
		case h.Key == hdrDLCount:
			dl.ReceiveCount, _ = strconv.Atoi(string(h.Value))
		case h.Key == hdrDLFirst:
			dl.FirstReceiveAt = msTime(h.Value)
		case h.Key == hdrDLLast:
			dl.LastReceiveAt = msTime(h.Value)
		case h.Key == hdrDLReason:
			dl.Reason = string(h.Value)
		case strings.HasPrefix(h.Key, prefixAttr):
			typ, val, _ := strings.Cut(string(h.Value), "\x00")
			if m.Attributes == nil {
				m.Attributes = map[string]Attribute{}
			}
			m.Attributes[h.Key[len(prefixAttr):]] = Attribute{DataType: typ, Value: []byte(val)}
		case strings.HasPrefix(h.Key, prefixSystem):
			if m.System == nil {
				m.System = map[string]string{}
			}
			m.System[h.Key[len(prefixSystem):]] = string(h.Value)
		}
	}
}

func hdr(key string, value []byte) batch.RecordHeader {
	return batch.RecordHeader{Key: key, Value: value}
}

func msBytes(t time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixMilli()))
	return b[:]
}

func msTime(b []byte) time.Time {
	if len(b) != 8 {
		return time.Time{}
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b)))
}

// size is the message's size for the maximum-message-size check: body plus
// attribute names, types and values, as SQS counts it.
func (m *Message) size() int {
	n := len(m.Body)
	for name, a := range m.Attributes {
		n += len(name) + len(a.DataType) + len(a.Value)
	}
	return n
}
