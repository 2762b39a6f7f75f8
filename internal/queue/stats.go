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
	// OldestSentAt is the send time of the message at Floor() if the cursor holds it; zero
	// means the oldest unfinished message is at Floor() in the log (not yet read).
	OldestSentAt time.Time
	Receives     uint64 // deliveries, first or repeated
	Redeliveries uint64 // deliveries with a receive count above 1
	DeadLettered uint64
	Expired      uint64
	Purges       uint64
}

// Stats reports counts as of now. It only moves messages whose time has come from waiting to
// visible, which changes nothing durable.
func (c *Cursor) Stats(now time.Time) Stats {
	c.promote(tn(now))
	s := Stats{
		InFlight: c.n[kInFlight], Delayed: c.n[kDelayed], Ready: c.n[kReadyNew] + c.n[kReadyRetry],
		Blocked: c.n[kBlocked], Held: len(c.msgs), Runs: len(c.done.runs),
		Receives: c.ctr.receives, Redeliveries: c.ctr.redeliveries,
		DeadLettered: c.ctr.deadLettered, Expired: c.ctr.expired, Purges: c.ctr.purges,
	}
	if e := c.msgs[c.done.floor]; e != nil {
		s.OldestSentAt = nt(e.sentAt)
	}
	return s
}
