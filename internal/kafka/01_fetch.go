package kafka

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// fetchReply is a Fetch response that the connection writes itself
// (fetch_write.go): the record batches are sections of segment files, sent
// with sendfile, never copied into the response.
type fetchReply struct {
	version int16
	topics  []fetchTopic
}

type fetchTopic struct {
	name  string
	id    [16]byte // v13+ name topics by id
	parts []fetchPart
}

type fetchPart struct {
	partition int32
	code      int16
	st        broker.PartitionState
	sec       broker.Section // Length 0: no records
	// gap, when sec is empty, is empty batches (batch.Fillers) spanning the quarantined
	// offsets the fetch offset lies in, so the client moves past them.
	gap []byte
	// aborted, for a read_committed fetch (non-nil), are the aborted
	// transactions among the records.
	aborted []broker.AbortedTxn
}

// zstdFetchVersion is the first Fetch version whose clients can read zstd
// batches (KIP-110).
const zstdFetchVersion = 10

// readCommitted is Fetch's and ListOffsets' isolation level 1 (KIP-98):
// nothing at or past the last stable offset, aborted transactions listed.
const readCommitted = 1

// handleFetch reads every requested partition and, while fewer than
// MinBytes are available, long-polls (broker.WaitForData) until data
// arrives or MaxWait passes. Fetch sessions (KIP-227) are not kept: the
// answer's session id 0 tells clients to send full requests.
func handleFetch(ctx context.Context, c *conn, req *kmsg.FetchRequest) (reply, error) {
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	for {
		rep, size, urgent := c.collectFetch(req)
		left := time.Until(deadline)
		if urgent || size >= int64(req.MinBytes) || left <= 0 || ctx.Err() != nil {
			return reply{fetch: rep}, nil
		}
		// Wait for the logs to grow past what this pass saw, not past the
		// requested offsets: with some data but under MinBytes, the latter
		// would return at once and spin.
		if !c.s.b.WaitForData(ctx, rep.seen(), left) {
			rep, _, _ = c.collectFetch(req)
			return reply{fetch: rep}, nil
		}
	}
}

// seen is where each partition's log ended when it was read.
func (r *fetchReply) seen() []broker.FetchPosition {
	var pos []broker.FetchPosition
	for _, t := range r.topics {
		for _, p := range t.parts {
			pos = append(pos, broker.FetchPosition{Topic: t.name, Partition: p.partition, Offset: p.st.HighWatermark})
		}
	}
	return pos
}

// collectFetch locates each partition's batches within the request's byte
// limits and returns the reply, its record bytes, and whether a partition
// failed (Kafka answers at once then, so the client learns of it).
func (c *conn) collectFetch(req *kmsg.FetchRequest) (*fetchReply, int64, bool) {
	budget := int64(req.MaxBytes)
	if budget <= 0 {
		budget = math.MaxInt32
	}
	rep := &fetchReply{version: req.Version}
	var total int64
	urgent := false
	for _, t := range req.Topics {
		ft := fetchTopic{name: t.Topic, id: t.TopicID}
		code := int16(0)
		if req.Version >= 13 {
			// v13+ name topics by id only; an id no topic has is
			// UNKNOWN_TOPIC_ID, which sends the client to Metadata.
			name, ok := c.topicNameByID(t.TopicID)
			ft.name = name
			if !ok {
				code = kerr.UnknownTopicID.Code
			}
		}
		if code == 0 && !c.mayFetch(ft.name) {
			code = kerr.TopicAuthorizationFailed.Code
		}
		if code != 0 {
			for _, p := range t.Partitions {
				ft.parts = append(ft.parts, fetchPart{partition: p.Partition, code: code,
					st: broker.PartitionState{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}})
			}
			rep.topics = append(rep.topics, ft)
			urgent = true
			continue
		}
		for _, p := range t.Partitions {
			// Once the response is full, later partitions report their
			// offsets only; the first non-empty one always gets one whole
			// batch even if larger than the limits (KIP-74).
			limit := min(int64(p.PartitionMaxBytes), budget-total)
			fp := c.fetchPartition(req, ft.name, p, limit, total == 0)
			urgent = urgent || fp.code != 0
			total += fp.sec.Length + int64(len(fp.gap))
			ft.parts = append(ft.parts, fp)
		}
		rep.topics = append(rep.topics, ft)
	}
	return rep, total, urgent
}

// mayFetch: consume on the topic. A follower's fetch does not exist here
// (one node), so every fetch is a consumer's.
func (c *conn) mayFetch(topic string) bool { return c.may(auth.Consume, auth.Topic, topic) }

func (c *conn) fetchPartition(req *kmsg.FetchRequest, topic string, p kmsg.FetchRequestTopicPartition, limit int64, first bool) fetchPart {
	version := req.Version
	fp := fetchPart{partition: p.Partition}
	room := limit > 0 || first
	// A client too old for zstd gets the batches before the first zstd
	// one; if that is the very first it can never get past it, and Kafka
	// answers UNSUPPORTED_COMPRESSION_TYPE (broker.ErrUnsupportedCompression).
	res, err := c.s.b.FetchSection(topic, p.Partition, p.FetchOffset, broker.SectionOptions{
		MaxBytes: int(max(limit, 1)), NoZstd: room && version < zstdFetchVersion,
		ReadCommitted: req.IsolationLevel == readCommitted})
	switch {
	case errors.Is(err, broker.ErrUnsupportedCompression):
		fp.code, fp.st = errCode(err, nil), res.PartitionState
		return fp
	case err != nil:
		fp.code = errCode(err, nil)
		fp.st = broker.PartitionState{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
		return fp
	}
	fp.st = res.PartitionState
	if room && res.Section.Length == 0 && res.GapEnd > p.FetchOffset {
		for _, b := range batch.Fillers(p.FetchOffset, res.GapEnd, -1, time.Now().UnixMilli()) {
			fp.gap = append(fp.gap, b...)
		}
	}
	if room {
		fp.sec = res.Section
		if req.IsolationLevel == readCommitted {
			fp.aborted = append([]broker.AbortedTxn{}, res.Aborted...)
		}
	}
	return fp // no room left: offsets only
}
