package queue

import "time"

// Stats is a point-in-time view of a cursor. The queue's visible count is
// (log high-water mark - ReadPos) + Ready + Blocked; the broker computes it, since only it
// knows the log's end.
type Stats struct {
	InFlight int // delivered, visibility not yet over
	Delayed  int // waiting out a send delay or a nack delay
	Ready    int // visible now and held in memory (new or due for redelivery)
	Blocked  int // FIFO: behind an unfinished message of its group (whatever its own delay)
	Held     int // all messages held in memory (the sum above)
	Runs     int // done ranges kept above the floor
	// OldestSentAt is the send time of the oldest unfinished message the cursor holds that is
	// not waiting out a delay; zero means there is none, and the oldest such message, if any,
	// is at ReadPos() in the log (not yet read).
	OldestSentAt time.Time
	Receives     uint64 // deliveries, first or repeated
	Redeliveries uint64 // deliveries with a receive count above 1
	DeadLettered uint64
	Expired      uint64
	Purges       uint64
	Acks         uint64
}

// Stats reports counts as of now. It only moves messages whose time has come from waiting to
// visible, which changes nothing durable.
func (c *Cursor) Stats(now time.Time) Stats {
	c.promote(tn(now))
	return c.Counts()
}

// Counts is Stats without moving anything: a message whose delay or visibility ran out but
// that no call has moved yet still counts as delayed or in flight. A replicated queue reads
// its replicas' cursors with it, since only a committed command may change one.
func (c *Cursor) Counts() Stats {
	s := Stats{
		InFlight: c.n[kInFlight], Delayed: c.n[kDelayed], Ready: c.n[kReadyNew] + c.n[kReadyRetry],
		Blocked: c.n[kBlocked], Held: len(c.msgs), Runs: len(c.done.runs),
		Receives: c.ctr.receives, Redeliveries: c.ctr.redeliveries,
		DeadLettered: c.ctr.deadLettered, Expired: c.ctr.expired, Purges: c.ctr.purges, Acks: c.ctr.acks,
	}
	s.OldestSentAt = nt(c.oldestUndelayed())
	return s
}

// oldestUndelayed is the earliest send time (Unix ns) of a held message not waiting out a delay,
// or 0. The floor's message answers at once unless it is delayed; otherwise every held message is
// looked at, at most the lookahead window plus what is in flight.
func (c *Cursor) oldestUndelayed() int64 {
	if e := c.msgs[c.done.floor]; e != nil && e.kind() != kDelayed {
		return e.sentAt
	}
	var oldest int64
	for _, e := range c.msgs {
		if e.kind() != kDelayed && (oldest == 0 || e.sentAt < oldest) {
			oldest = e.sentAt
		}
	}
	return oldest
}
