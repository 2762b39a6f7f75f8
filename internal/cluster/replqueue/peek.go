package replqueue

import (
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// Peeked is one unfinished message as Peek sees it.
type Peeked struct {
	Message
	State        queue.PeekState
	ReceiveCount int
	VisibleAt    time.Time // in flight or delayed: when it is visible again
}

// peekProbes bounds the offsets one Peek looks at, so a peek over a long run of finished
// messages above the floor (acks out of order) answers in bounded time; the offset it
// returns says where to go on.
const peekProbes = 1 << 16

// Peek returns up to n unfinished messages at or after offset from, in offset order, as
// this replica has applied them, with where each stands at now, and the offset to peek
// from next (the end of the queue's offsets when nothing more was there). It changes
// nothing: an operator's look into a queue must not receive.
func (m *Machine) Peek(now time.Time, from int64, n int) ([]Peeked, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Peeked
	off := max(from, m.cur.Floor())
	for probes := 0; off < m.next && len(out) < n && probes < peekProbes; off, probes = off+1, probes+1 {
		s := m.msgs[off]
		if s == nil {
			continue // finished
		}
		meta := queue.Meta{Offset: off, GroupID: s.group, SentAt: time.Unix(0, s.sentAt).UTC()}
		if s.availAt != 0 {
			meta.AvailableAt = time.Unix(0, s.availAt).UTC()
		}
		p := m.cur.Peek(now, meta)
		if p.State == queue.PeekDone {
			continue
		}
		out = append(out, Peeked{Message: s.message(off), State: p.State, ReceiveCount: p.ReceiveCount, VisibleAt: p.VisibleAt})
	}
	return out, off
}
