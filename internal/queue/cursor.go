package queue

import (
	"fmt"
	"time"
)

// Meta is what the broker reads from the log for one message and offers to the cursor.
type Meta struct {
	Offset      int64
	GroupID     string    // FIFO message group; ignored for ordering in a standard queue
	SentAt      time.Time // append time; retention counts from here
	AvailableAt time.Time // SentAt + per-message delay; zero means at once
}

// Delivery is one message handed to a consumer by Receive.
type Delivery struct {
	Offset          int64
	Receipt         string // opaque; required by Ack, Extend and Nack
	ReceiveCount    int
	FirstReceivedAt time.Time
	Deadline        time.Time // hidden until then unless extended, nacked or acked
	// FencingToken only grows across deliveries of a message (it is a queue-wide counter), so a
	// downstream system can refuse writes from a worker whose lease ran out.
	FencingToken uint64
	GroupID      string
	SentAt       time.Time
}

// Cursor is one queue's delivery state over its partition log. It is not safe for concurrent
// use: the broker gives each queue one owner.
type Cursor struct {
	cfg     Config
	done    doneSet
	readPos int64 // next offset wanted from the log (before skipping known offsets)
	clock   int64 // latest `now` seen; only decides whether a newly placed entry is due
	token   uint64
	msgs    map[int64]*entry
	peak    int               // largest len(msgs) since the map was last rebuilt; see drop
	groups  map[string]*group // FIFO only
	ready   heap              // visible now, by offset
	timer   heap              // delayed, nacked, in flight: by the time they become visible
	n       [nKinds]int
	ctr     counters
	fault   error // first own event that failed to apply; see Fault
}

// counters are the durable totals Stats reports; they are rebuilt by replay.
type counters struct {
	receives, redeliveries, deadLettered, expired, purges, acks uint64
}

// New returns an empty cursor whose log starts at offset 0.
func New(cfg Config) (*Cursor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cursor{
		cfg:    cfg.withDefaults(),
		msgs:   make(map[int64]*entry),
		groups: make(map[string]*group),
		ready:  heap{less: byOffset},
		timer:  heap{less: byTime},
	}
	return c, nil
}

// Config returns the configuration in effect, with defaults filled in.
func (c *Cursor) Config() Config { return c.cfg }

// Floor is the lowest offset not finished: everything below it is acked, dead-lettered,
// expired, purged or not a message, so storage may delete it.
func (c *Cursor) Floor() int64 { return c.done.floor }

// ReadPos is the next offset the cursor wants from the log. After a restart it rewinds to the
// first offset that is neither done nor known from the journal, so the buffer is re-read.
func (c *Cursor) ReadPos() int64 {
	// Skip what is already known; bounded by the messages held.
	for {
		c.readPos = c.done.next(c.readPos)
		if c.msgs[c.readPos] == nil {
			return c.readPos
		}
		c.readPos++
	}
}

// NackReason is the reason of the last Nack of the message at off that the cursor holds
// ("" if none, or if it holds no such message): what a dead-letter record says of why it
// failed, for a caller that dead-letters it itself (the cluster's replicated queue).
func (c *Cursor) NackReason(off int64) string {
	if e := c.msgs[off]; e != nil {
		return e.reason
	}
	return ""
}

// Wants is how many more metas Offer will accept now (never-delivered, not-delayed messages
// are bounded by Config.Lookahead).
func (c *Cursor) Wants() int {
	return max(0, c.cfg.Lookahead-c.n[kReadyNew]-c.n[kBlocked])
}

func (c *Cursor) expired(sentAt, now int64) bool {
	return sentAt != 0 && now-sentAt >= int64(c.cfg.Retention)
}

// Offer gives the cursor the next metas from the log, in offset order starting at ReadPos. It
// accepts at most Wants() of them that need buffering and returns how many it consumed; the
// caller offers the rest later. Offsets below ReadPos are ignored (already known). A gap
// between offsets is recorded as skipped, and a message already past retention is dropped.
func (c *Cursor) Offer(now time.Time, metas []Meta) (int, []Event) {
	c.promote(tn(now))
	var evs []Event
	i := 0
	for ; i < len(metas); i++ {
		m := metas[i]
		rp := c.ReadPos()
		if m.Offset < rp {
			continue
		}
		if c.Wants() == 0 {
			break
		}
		if m.Offset > rp {
			evs = c.skipRange(evs, rp, m.Offset)
		}
		c.readPos = m.Offset + 1
		if c.msgs[m.Offset] != nil || c.done.contains(m.Offset) {
			continue // known from the journal before a restart
		}
		if c.expired(tn(m.SentAt), tn(now)) {
			evs = c.emitExpired(evs, m.Offset)
			continue
		}
		e := &entry{off: m.Offset, group: m.GroupID, sentAt: tn(m.SentAt), at: tn(m.AvailableAt)}
		c.hold(e)
		c.link(e)
	}
	return i, evs
}

// emitExpired drops one message past retention, merging consecutive drops into one event.
func (c *Cursor) emitExpired(evs []Event, off int64) []Event {
	c.mustApply(Expired{From: off, To: off + 1})
	if n := len(evs); n > 0 {
		if last, ok := evs[n-1].(Expired); ok && last.To == off {
			evs[n-1] = Expired{From: last.From, To: off + 1}
			return evs
		}
	}
	return append(evs, Expired{From: off, To: off + 1})
}

// skipRange records offsets in [a, b) that are not messages (compacted, control records).
func (c *Cursor) skipRange(evs []Event, a, b int64) []Event {
	var parts []Skipped
	c.done.notDone(a, b, func(a, b int64) { parts = append(parts, Skipped{From: a, To: b}) })
	for _, p := range parts {
		c.mustApply(p)
		evs = append(evs, p)
	}
	return evs
}

// Skip tells the cursor that offsets below upTo it has not been offered are not messages it
// must deliver (the broker found no message there). It moves ReadPos to upTo.
func (c *Cursor) Skip(upTo int64) []Event {
	rp := c.ReadPos()
	if upTo <= rp {
		return nil
	}
	evs := c.skipRange(nil, rp, upTo)
	c.readPos = upTo
	return evs
}

// Purge finishes every message below logEnd (the log's high-water mark): buffered, delayed and
// in flight alike. Receipts of purged deliveries become stale.
func (c *Cursor) Purge(now time.Time, logEnd int64) []Event {
	c.promote(tn(now))
	ev := Purged{UpTo: max(logEnd, c.ReadPos())}
	c.mustApply(ev)
	return []Event{ev}
}

// link places an unplaced entry by its state and counts it.
func (c *Cursor) link(e *entry) {
	switch {
	case c.cfg.FIFO && !c.isHead(e):
		e.where = wBlocked
	case e.at > c.clock:
		e.where = wTimer
		c.timer.push(e)
	default:
		e.where = wReady
		c.ready.push(e)
	}
	c.n[e.kind()]++
}

// unlink takes an entry out of its place and its count.
func (c *Cursor) unlink(e *entry) {
	if e.where == wNone {
		return
	}
	c.n[e.kind()]--
	switch e.where {
	case wReady:
		c.ready.remove(e.idx)
	case wTimer:
		c.timer.remove(e.idx)
	}
	e.where = wNone
}

// promote moves every entry whose time has come from the timer heap to the ready heap. It
// changes where an entry is kept, never what it is, so it needs no event.
func (c *Cursor) promote(now int64) {
	c.clock = max(c.clock, now)
	for e := c.timer.peek(); e != nil && e.at <= c.clock; e = c.timer.peek() {
		c.unlink(e)
		c.link(e)
	}
}

// hold starts tracking a new entry.
func (c *Cursor) hold(e *entry) {
	c.msgs[e.off] = e
	c.peak = max(c.peak, len(c.msgs))
	if c.cfg.FIFO {
		c.joinGroup(e)
	}
}

// drop forgets a finished entry.
func (c *Cursor) drop(e *entry) {
	c.unlink(e)
	delete(c.msgs, e.off)
	if c.cfg.FIFO {
		c.leaveGroup(e)
	}
	// Go maps never shrink. After a burst (many in flight, then acked) rebuild the map so
	// memory follows what is held now, not the worst moment so far.
	if c.peak > 4096 && len(c.msgs) < c.peak/8 {
		m := make(map[int64]*entry, len(c.msgs))
		for k, v := range c.msgs {
			m[k] = v
		}
		c.msgs, c.peak = m, len(m)
	}
}

// mustApply applies an event the cursor itself just made. Failing would be
// a bug here; rather than panic while the caller holds its lock, the cursor
// records the first such failure (Fault) so the owner can rebuild it from
// its journal.
func (c *Cursor) mustApply(ev Event) {
	if err := c.Apply(ev); err != nil && c.fault == nil {
		c.fault = fmt.Errorf("queue: own event %#v does not apply: %w", ev, err)
	}
}

// Fault reports a bug the cursor caught in itself: an event it made that did
// not apply. After one, its state cannot be trusted; rebuild it from the
// journal (or its last snapshot and the journal).
func (c *Cursor) Fault() error { return c.fault }
