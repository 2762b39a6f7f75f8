package replqueue

import "time"

// Depth is what a replica holds, for a queue's attributes (SQS's approximate counts) and
// for long polling. It is read without changing the machine: only a committed command may
// change a replica's cursor, or replicas would diverge.
type Depth struct {
	Visible  int64 // ready now, including messages stored past the cursor's lookahead
	InFlight int64
	Delayed  int64
	// OldestSentAt is the send time of the oldest unfinished message that is not delayed
	// (zero: none).
	OldestSentAt time.Time
	// NextDue is the earliest time a delay or a visibility timeout runs out (zero: none).
	NextDue time.Time
	Sent    int64 // messages sent since the queue was created
	Dead    int64 // dead letters waiting for their copy to the dead-letter queue

	// The cursor's counters since the queue was created: every replica applies the same
	// commands and a snapshot carries them, so any replica answers the same once caught up.
	Received, Redelivered, Acked, DeadLettered, Expired uint64
}

// Depth returns the counts as of the last applied command. A message whose delay ran out
// since counts as delayed until the next command moves it: the counts are approximate,
// as SQS says of its own.
func (m *Machine) Depth() Depth {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.cur.Counts()
	d := Depth{Visible: int64(cs.Ready + cs.Blocked), InFlight: int64(cs.InFlight), Delayed: int64(cs.Delayed),
		OldestSentAt: cs.OldestSentAt, Sent: m.next, Dead: int64(len(m.dead)),
		Received: cs.Receives, Redelivered: cs.Redeliveries, Acked: cs.Acks, DeadLettered: cs.DeadLettered,
		Expired: cs.Expired}
	// Stored messages the cursor has not read yet (past its lookahead window).
	var oldestUnread int64
	for off := m.cur.ReadPos(); off < m.next; off++ {
		s := m.msgs[off]
		if s == nil {
			continue
		}
		if s.availAt > m.now {
			d.Delayed++
			continue
		}
		d.Visible++
		if oldestUnread == 0 || s.sentAt < oldestUnread {
			oldestUnread = s.sentAt
		}
	}
	if d.OldestSentAt.IsZero() && oldestUnread != 0 {
		d.OldestSentAt = time.Unix(0, oldestUnread).UTC()
	}
	if due, ok := m.cur.NextDue(); ok {
		d.NextDue = due
	}
	return d
}

// Deliverable reports whether a Receive proposed at now could hand something out: a message
// is ready, or a delay or visibility timeout has run out by now. A long poll asks it before
// proposing a Receive, so waiting costs no Raft entry while the queue is empty.
//
// Messages stored past the cursor's lookahead need no look: the machine offers the cursor
// messages until its window is full of ready ones, so unread messages mean Ready > 0.
func (m *Machine) Deliverable(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cs := m.cur.Counts(); cs.Ready > 0 {
		return true
	}
	due, ok := m.cur.NextDue()
	return ok && !now.Before(due)
}
