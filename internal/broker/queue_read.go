package broker

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/storage"
)

// fillReadBytes is how much of the log one fill step reads. It bounds the
// work a receive does beyond its own messages.
const fillReadBytes = 256 << 10

// fillMin is how many free lookahead slots make a fill worth a log read: one
// read decodes a few hundred records, so topping up one slot at a time would
// decode the same records again on every receive.
const fillMin = 128

// fillLocked offers the cursor the metadata of messages after its read
// position, as many as it wants. Called with q.mu held.
func (q *queueRT) fillLocked(now time.Time) ([]queue.Event, error) {
	return q.fillReadsLocked(now, -1)
}

// fillReadsLocked is fillLocked reading the log at most reads times
// (negative: no limit). Called with q.mu held.
func (q *queueRT) fillReadsLocked(now time.Time, reads int) ([]queue.Event, error) {
	evs := q.offerCachedLocked(now)
	if w := q.cur().Wants(); w < fillMin && w < q.cur().Config().Lookahead {
		return evs, nil
	}
	for q.cur().Wants() > 0 && reads != 0 {
		pos := q.cur().ReadPos()
		if start := q.log.LogStartOffset(); pos < start {
			evs = append(evs, q.cur().Skip(start)...)
			continue
		}
		if pos >= q.log.HighWatermark() {
			break
		}
		r := q.ahead
		q.ahead = nil
		if r == nil || r.pos != pos {
			var err error
			if r, err = readFill(q.log, pos, q.cur().Wants()); err != nil {
				return evs, err
			}
			reads--
		}
		if len(r.metas) == 0 {
			end := r.end
			if end <= pos { // nothing readable here: a damaged range, or nothing yet
				if end = q.log.SkipDamaged(pos); end == pos {
					break
				}
			}
			evs = append(evs, q.cur().Skip(end)...)
			continue
		}
		n, e := q.cur().Offer(now, r.metas)
		evs = append(evs, e...)
		// What the cursor took is about to be delivered: cache it, so the
		// receive does not read it again (see readFill).
		for i := range n {
			if m := r.msgs[i]; m != nil && q.cache.get(m.offset) == nil {
				q.cache.put(m.offset, m.msg, now)
			}
		}
		if n == 0 {
			break
		}
	}
	return evs, nil
}

// fillRead is one log read decoded for the cursor: the metas of the records
// at or after pos, up to end, and the first ones as messages to cache.
type fillRead struct {
	pos, end int64
	metas    []queue.Meta
	msgs     []*offsetMessage // parallel to metas; nil past the ones copied
}

type offsetMessage struct {
	offset int64
	msg    *Message
}

// readFill reads and decodes the log at pos for a fill, and copies out the
// first keep messages (what the cursor wants now) for the cache: what the
// cursor takes is delivered next, so keeping it saves the second read and
// decode of the same bytes that delivering it from the log costs
// (readMessages). That holds for a backlog too: the cache stays bounded by
// the cursor's window and maxBytes, never by the backlog, and only a fill,
// that is a receive, puts a backlog's message there. It needs no lock.
func readFill(log *storage.Log, pos int64, keep int) (*fillRead, error) {
	data, err := log.Read(pos, fillReadBytes)
	if err != nil {
		return nil, err
	}
	metas, recs, end, err := messageMetas(data, pos)
	if err != nil {
		return nil, err
	}
	r := &fillRead{pos: pos, end: end, metas: metas, msgs: make([]*offsetMessage, len(metas))}
	for i, m := range metas[:min(keep, len(metas))] {
		r.msgs[i] = &offsetMessage{offset: m.Offset, msg: recordMessage(recs[i])}
	}
	return r, nil
}

// planReadAheadLocked says whether the next fill will read the log, and
// where: a receive then reads it after releasing q.mu (readAhead), while it
// waits for its journal write anyway, instead of the next receive reading
// it with q.mu held. Called with q.mu held.
func (q *queueRT) planReadAheadLocked() (pos int64, keep int, ok bool) {
	if q.readingAhead || q.ahead != nil {
		return 0, 0, false
	}
	w := q.cur().Wants()
	if w < fillMin && w < q.cur().Config().Lookahead {
		return 0, 0, false
	}
	pos = q.cur().ReadPos()
	if pos < q.log.LogStartOffset() || pos >= q.log.HighWatermark() {
		return 0, 0, false
	}
	q.readingAhead = true
	return pos, w, true
}

// readAhead does the read planReadAheadLocked planned and leaves it for the
// next fill, which uses it if the cursor still reads from pos. Called
// without q.mu.
func (q *queueRT) readAhead(pos int64, keep int) {
	r, err := readFill(q.log, pos, keep)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.readingAhead = false
	if err == nil && q.cur().ReadPos() == pos {
		q.ahead = r // an error is left for the fill to meet and report
	}
}

// messageMetas decodes the cursor's view of each record at or after from in
// data (whole batches), the records themselves (aliasing data), and the
// offset after the last record.
func messageMetas(data []byte, from int64) ([]queue.Meta, []batch.Record, int64, error) {
	var metas []queue.Meta
	var recs []batch.Record
	end := from
	err := eachRecord(data, func(r batch.Record) bool {
		end = r.Offset + 1
		if r.Offset < from {
			return true
		}
		m := queue.Meta{Offset: r.Offset, SentAt: time.UnixMilli(r.Timestamp)}
		for _, h := range r.Headers {
			switch h.Key {
			case hdrGroup:
				m.GroupID = string(h.Value)
			case hdrAvailableAt:
				m.AvailableAt = msTime(h.Value)
			}
		}
		metas = append(metas, m)
		recs = append(recs, r)
		return true
	})
	return metas, recs, end, err
}

// eachRecord calls fn for each record of the whole batches in data until fn
// returns false.
func eachRecord(data []byte, fn func(batch.Record) bool) error {
	for len(data) > 0 {
		n, err := batch.FrameSize(data)
		if err != nil {
			return err
		}
		if int64(len(data)) < n {
			return fmt.Errorf("broker: short batch in log read")
		}
		for r, err := range batch.Records(data[:n]) {
			if err != nil {
				return err
			}
			if !fn(r) {
				return nil
			}
		}
		data = data[n:]
	}
	return nil
}

// readMessages reads the messages at the given offsets from the log. It needs
// no lock: the log serves positional reads of durable data, and the segments
// of unfinished messages are never deleted. Only the wanted records are
// copied out; one read usually covers several wanted offsets.
// An offset the log no longer holds (its batch was damaged and quarantined)
// is missing from the map: the caller loses it (cursorSet.lose).
func readMessages(log *storage.Log, offsets []int64) (map[int64]*Message, error) {
	out := make(map[int64]*Message, len(offsets))
	want := make(map[int64]bool, len(offsets))
	last := int64(-1)
	for _, off := range offsets {
		want[off] = true
		last = max(last, off)
	}
	for _, off := range offsets {
		if out[off] != nil {
			continue
		}
		data, err := log.Read(off, readMessageBytes)
		if err != nil {
			return nil, fmt.Errorf("read message at %d: %w", off, err)
		}
		err = eachRecord(data, func(r batch.Record) bool {
			if want[r.Offset] && out[r.Offset] == nil {
				out[r.Offset] = recordMessage(r)
			}
			return r.Offset < last
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readMessageBytes is the read size for delivering messages: a receive of ten
// 1 KiB messages usually needs one read.
const readMessageBytes = 16 << 10

// recordMessage copies a record into a Message (records alias the read buffer).
func recordMessage(r batch.Record) *Message {
	m := &Message{Body: bytes.Clone(r.Value)}
	if m.Body == nil {
		m.Body = []byte{}
	}
	hs := make([]batch.RecordHeader, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = batch.RecordHeader{Key: h.Key, Value: bytes.Clone(h.Value)}
	}
	decodeHeaders(m, hs, time.UnixMilli(r.Timestamp))
	return m
}

// sendBatchBytes is about the most message bytes encodeMessageBatches puts in
// one batch: a queue's log takes batches of up to 8 MiB (queueRT's
// MaxBatchBytes), and one send may carry more than that (ten 1 MiB messages,
// or a dead-letter copy of everything one receive gave up on).
const sendBatchBytes = 4 << 20

// encodeMessageBatches builds batches holding msgs in order, each about
// sendBatchBytes at most (a bigger message gets a batch of its own).
func encodeMessageBatches(msgs []*Message, now time.Time) ([][]byte, error) {
	var out [][]byte
	for start := 0; start < len(msgs); {
		end, size := start, 0
		for end < len(msgs) && (end == start || size+encodedSize(msgs[end]) <= sendBatchBytes) {
			size += encodedSize(msgs[end])
			end++
		}
		b, err := encodeMessages(msgs[start:end], now)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
		start = end
	}
	return out, nil
}

// encodedSize is about how many bytes m takes in a batch.
func encodedSize(m *Message) int {
	n := m.size() + len(m.ID) + len(m.GroupID) + len(m.DedupID) + 256
	for k, v := range m.System {
		n += len(k) + len(v)
	}
	return n
}

// encodeMessages builds one batch holding msgs, stamped with now.
func encodeMessages(msgs []*Message, now time.Time) ([]byte, error) {
	recs := make([]batch.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = batch.Record{Timestamp: now.UnixMilli(), Value: m.Body, Headers: encodeHeaders(m)}
		if recs[i].Value == nil {
			recs[i].Value = []byte{}
		}
	}
	return batch.Build(recs, batch.Options{})
}

// warm reads the head of the log into the cursor at open, as the first
// receive would: until then the cursor knows nothing of the messages'
// delays, and stats would count a delayed message as visible. One read, so
// a start over many queues with deep backlogs stays cheap; a backlog beyond
// it is counted as visible until a receive reaches it.
func (q *queueRT) warm() {
	q.mu.Lock()
	evs, err := q.fillReadsLocked(q.now(), 1)
	done := q.journalLocked(evs)
	q.mu.Unlock()
	if err = errors.Join(err, q.wait(done)); err != nil {
		q.logger.Warn("reading the queue's head at open", "err", err)
	}
}
