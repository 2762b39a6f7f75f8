package broker

import (
	"bytes"
	"maps"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// recentCache keeps the messages a queue's cursor is about to deliver in the
// form a log read would return them, so that while consumers keep up with
// producers a message goes from Send to Receive without being read back from
// the log: no read to learn of it (fill), none to deliver it.
//
// Only messages the cursor has room for when they are sent, or takes from a
// log read when it fills its window (queue_read.go), are kept, an ack
// forgets its message, and maintenance forgets what was cached longer ago
// than recentCacheAge, so the cache is bounded by the window (and by
// maxBytes), never by the backlog, and empties when nobody consumes. A miss costs a log
// read, exactly what every read cost before the cache. Guarded by the
// queue's mu. Cached messages are never modified: deliveries share them.
type recentCache struct {
	// slots is indexed by offset modulo size, a power of two. It is
	// allocated by the first put and dropped once the cache is empty again
	// (forgetOlder), so an idle queue, one of 100,000, holds none.
	slots    []cacheSlot
	size     int
	held     int // slots with a message
	bytes    int // body bytes held
	maxBytes int
}

type cacheSlot struct {
	off int64
	m   *Message  // nil: empty
	at  time.Time // when it was cached, for forgetOlder
}

// recentCacheBytes bounds the bodies one queue's cache holds, and
// maxRecentCacheSlots its window (a queue may set a much larger lookahead).
// Maintenance drops what is older than recentCacheAge.
const (
	recentCacheBytes    = 8 << 20
	maxRecentCacheSlots = 4096
	recentCacheAge      = time.Second
)

func newRecentCache(window int) *recentCache {
	n := 1
	for n < window {
		n <<= 1
	}
	return &recentCache{size: n, maxBytes: recentCacheBytes}
}

func (c *recentCache) slot(off int64) *cacheSlot { return &c.slots[off&int64(c.size-1)] }

func (c *recentCache) put(off int64, m *Message, at time.Time) {
	if c.slots == nil {
		c.slots = make([]cacheSlot, c.size)
	}
	s := c.slot(off)
	if s.m != nil {
		c.drop(s)
	}
	if c.bytes+len(m.Body) > c.maxBytes {
		return
	}
	*s = cacheSlot{off: off, m: m, at: at}
	c.bytes += len(m.Body)
	c.held++
}

// drop empties a slot that holds a message.
func (c *recentCache) drop(s *cacheSlot) {
	c.bytes -= len(s.m.Body)
	c.held--
	s.m = nil
}

func (c *recentCache) get(off int64) *Message {
	if c.slots == nil {
		return nil
	}
	s := c.slot(off)
	if s.m == nil || s.off != off {
		return nil
	}
	return s.m
}

func (c *recentCache) forget(off int64) {
	if c.slots == nil {
		return
	}
	if s := c.slot(off); s.m != nil && s.off == off {
		c.drop(s)
	}
}

// forgetFinished drops the messages that events finished for good.
func (c *recentCache) forgetFinished(evs []queue.Event) {
	for _, ev := range evs {
		switch e := ev.(type) {
		case queue.Acked:
			c.forget(e.Offset)
		case queue.DeadLettered:
			c.forget(e.Offset)
		case queue.Purged:
			c.clear()
		}
	}
}

// forgetOlder drops messages cached before cutoff (by a send, or by a
// receive's fill). A message that sat that long without being acked waits
// behind others or for a slow consumer: a log read serves it as well, and
// the cache should not hold a full window of a queue nobody consumes. An
// empty cache gives its slots back.
func (c *recentCache) forgetOlder(cutoff time.Time) {
	if c.held == 0 {
		c.slots = nil
		return
	}
	for i := range c.slots {
		if sl := &c.slots[i]; sl.m != nil && sl.at.Before(cutoff) {
			c.drop(&c.slots[i])
		}
	}
	if c.held == 0 {
		c.slots = nil
	}
}

func (c *recentCache) clear() {
	c.slots = nil
	c.bytes, c.held = 0, 0
}

// storedForm returns m as readMessages will decode it from the record that
// encodeMessages builds of it at now: times cut to milliseconds, the send
// time taken from the record unless dead-letter metadata carries the
// original, empty maps as nil, and nothing shared with the caller's input.
func storedForm(m *Message, now time.Time) *Message {
	s := &Message{ID: m.ID, Body: bytes.Clone(m.Body), GroupID: m.GroupID, DedupID: m.DedupID,
		SentAt: time.UnixMilli(now.UnixMilli())}
	if s.Body == nil {
		s.Body = []byte{}
	}
	if len(m.Attributes) > 0 {
		s.Attributes = make(map[string]Attribute, len(m.Attributes))
		for k, a := range m.Attributes {
			s.Attributes[k] = Attribute{DataType: a.DataType, Value: bytes.Clone(a.Value)}
			if s.Attributes[k].Value == nil {
				s.Attributes[k] = Attribute{DataType: a.DataType, Value: []byte{}}
			}
		}
	}
	if len(m.System) > 0 {
		s.System = maps.Clone(m.System)
	}
	if !m.AvailableAt.IsZero() {
		s.AvailableAt = time.UnixMilli(m.AvailableAt.UnixMilli())
	}
	if dl := m.DeadLetter; dl != nil {
		s.SentAt = time.UnixMilli(m.SentAt.UnixMilli())
		s.DeadLetter = &DeadLetterInfo{SourceQueue: dl.SourceQueue, ReceiveCount: dl.ReceiveCount,
			FirstReceiveAt: time.UnixMilli(dl.FirstReceiveAt.UnixMilli()),
			LastReceiveAt:  time.UnixMilli(dl.LastReceiveAt.UnixMilli()), Reason: dl.Reason,
			At: time.UnixMilli(now.UnixMilli())} // the record's timestamp, as decodeHeaders reads it
	}
	return s
}

// cacheSentLocked remembers the just-stored messages (offsets first,
// first+1, ...) that the cursor has room to take now, and offers it what it
// can take from the cache. A message beyond that room waits in the log: the
// cursor reads it when it gets there, so a backlog is never cached. Called
// with q.mu held, after the append is durable.
func (q *queueRT) cacheSentLocked(first int64, msgs []*Message, now time.Time) []queue.Event {
	rp := q.cur().ReadPos()
	room := min(int64(q.cur().Wants()), int64(q.cache.size))
	for k, m := range msgs {
		if off := first + int64(k); off >= rp && off-rp < room {
			q.cache.put(off, storedForm(m, now), now)
		}
	}
	return q.offerCachedLocked(now)
}

// offerCachedLocked offers the cursor the run of cached messages that starts
// at its read position, up to what it wants. It stops at the first offset the
// cache lacks (fill then reads the log from there). Called with q.mu held.
func (q *queueRT) offerCachedLocked(now time.Time) []queue.Event {
	want := q.cur().Wants()
	if want == 0 {
		return nil
	}
	hw := q.log.HighWatermark()
	var metas []queue.Meta
	for pos := q.cur().ReadPos(); len(metas) < want && pos < hw; pos++ {
		m := q.cache.get(pos)
		if m == nil {
			break
		}
		// The cursor's send time is the record's, as messageMetas reads it from the log: a
		// dead letter's retention counts from its move, whichever path offered it.
		sentAt := m.SentAt
		if dl := m.DeadLetter; dl != nil && !dl.At.IsZero() {
			sentAt = dl.At
		}
		metas = append(metas, queue.Meta{Offset: pos, GroupID: m.GroupID, SentAt: sentAt, AvailableAt: m.AvailableAt})
	}
	if len(metas) == 0 {
		return nil
	}
	_, evs := q.cur().Offer(now, metas)
	return evs
}

// cachedLocked returns the cached message of each delivery, nil where the
// cache has none. Called with q.mu held.
func (q *queueRT) cachedLocked(ds []queue.Delivery) []*Message {
	out := make([]*Message, len(ds))
	for i, d := range ds {
		out[i] = q.cache.get(d.Offset)
	}
	return out
}
