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
	Reason         string // the last nack reason, if any
}

// newMessageID returns a random UUID (version 4), the form SQS clients expect.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (Go 1.24+ panics instead of returning an error)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
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
func encodeHeaders(m *Message) []batch.RecordHeader {
	h := make([]batch.RecordHeader, 0, 4+len(m.Attributes)+len(m.System))
	h = append(h, hdr(hdrID, []byte(m.ID)))
	if m.GroupID != "" {
		h = append(h, hdr(hdrGroup, []byte(m.GroupID)))
	}
	if m.DedupID != "" {
		h = append(h, hdr(hdrDedup, []byte(m.DedupID)))
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
	for name, a := range m.Attributes {
		v := make([]byte, 0, len(a.DataType)+1+len(a.Value))
		v = append(append(append(v, a.DataType...), 0), a.Value...)
		h = append(h, hdr(prefixAttr+name, v))
	}
	for name, v := range m.System {
		h = append(h, hdr(prefixSystem+name, []byte(v)))
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
