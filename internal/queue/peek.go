package queue

import "time"

// PeekState is where one message stands, as Peek reports it.
type PeekState uint8

// Peek states.
const (
	// PeekDone: finished (acked, dead-lettered, expired, purged) or not a
	// message; a browser leaves it out.
	PeekDone PeekState = iota
	// PeekVisible: not in flight and not delayed, so a receive may deliver
	// it (a FIFO message not yet read from the log may still wait behind
	// its group: the cursor cannot know before it reads it).
	PeekVisible
	// PeekBlocked: FIFO, behind an unfinished message of its group.
	PeekBlocked
	// PeekInFlight: delivered, its visibility timeout not over.
	PeekInFlight
	// PeekDelayed: waiting out a send delay or a nack delay.
	PeekDelayed
)

// String names the state as the native API and the console show it.
func (s PeekState) String() string {
	switch s {
	case PeekVisible:
		return "visible"
	case PeekBlocked:
		return "blocked"
	case PeekInFlight:
		return "in_flight"
	case PeekDelayed:
		return "delayed"
	default:
		return "done"
	}
}

// Peeked is what Peek says of one message.
type Peeked struct {
	State        PeekState
	ReceiveCount int
	// VisibleAt is when an in-flight or delayed message becomes visible
	// again; zero otherwise.
	VisibleAt time.Time
}

// Peek says where the message m (its meta, read from the log by the
// caller) stands at now. It changes nothing at all, not even what Stats
// moves from waiting to visible, so a browser looking at a queue can never
// alter what its consumers get: a message whose time has come is reported
// visible without being moved.
func (c *Cursor) Peek(now time.Time, m Meta) Peeked {
	if c.done.contains(m.Offset) {
		return Peeked{State: PeekDone}
	}
	t := tn(now)
	if e := c.msgs[m.Offset]; e != nil {
		p := Peeked{ReceiveCount: int(e.count)}
		switch {
		case e.where == wBlocked:
			p.State = PeekBlocked
		case e.where == wReady || e.at <= t:
			p.State = PeekVisible
		case e.inFlight:
			p.State, p.VisibleAt = PeekInFlight, nt(e.at)
		default:
			p.State, p.VisibleAt = PeekDelayed, nt(e.at)
		}
		return p
	}
	// Not read from the log yet: its meta says it all.
	switch {
	case c.expired(tn(m.SentAt), t):
		return Peeked{State: PeekDone} // the next read drops it
	case tn(m.AvailableAt) > t:
		return Peeked{State: PeekDelayed, VisibleAt: m.AvailableAt}
	}
	return Peeked{State: PeekVisible}
}
