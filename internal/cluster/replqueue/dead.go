package replqueue

import (
	"fmt"
	"slices"
	"time"
)

// Dead letters. The receive limit comes with each OpReceiveLimited (the broker reads the
// queue's current redrive policy), not from the machine's configuration, so the policy
// may change after creation and every replica still computes the same thing. A message
// that a limited Receive finds already received that many times is delivered to nobody:
// apply finishes it in the cursor (as an ack would, which lets the next message of its
// FIFO group go) and keeps it here, body and all, until an OpDeadDone says its copy in the
// dead-letter queue is committed. The dead letters are part of the snapshot, so a copy
// interrupted by a crash or a failover is made again by the next leader: a message is in
// the source's dead letters, in the dead-letter queue, or (when a copy is retried after
// the dead-letter queue's deduplication window) in the dead-letter queue twice — never in
// neither (docs/cluster.md, "Queues", its "Dead-letter queues").

// deadLetter is a message moved out of the cursor and not yet copied. Its history (first
// and last receive, last nack reason) is what the copy says of it, and not in the snapshot:
// the fields were added after the snapshot format, and a replica restored from a snapshot
// taken between the move and the copy (a failover in that window) copies it without them.
type deadLetter struct {
	s       *stored
	count   int // receives it had
	firstAt time.Time
	lastAt  time.Time // the receive that moved it (the cursor had just delivered it again)
	reason  string
}

// DeadLetter is a message waiting for its copy to the dead-letter queue.
type DeadLetter struct {
	Message
	ReceiveCount int
	// FirstReceivedAt, LastReceivedAt and NackReason are its history, when known (zero
	// after a restore from a snapshot; see deadLetter).
	FirstReceivedAt, LastReceivedAt time.Time
	NackReason                      string
}

// receive runs a Receive; a limited one moves messages over the limit to the dead letters
// and goes on receiving in their place, as the single node's cursor does.
func (m *Machine) receive(now time.Time, c *Command, r *Result) {
	want := c.Max
	for want > 0 {
		ds, evs, err := m.cur.Receive(now, want, c.Timeout)
		m.forget(evs)
		if err != nil {
			r.Err = err
			return
		}
		if len(ds) == 0 {
			return
		}
		for _, d := range ds {
			s := m.msgs[d.Offset]
			if s == nil { // the cursor delivered what we never stored: state is corrupt
				r.Err = fmt.Errorf("replqueue: delivered offset %d has no body", d.Offset)
				want--
				continue
			}
			if c.Op == OpReceiveLimited && d.ReceiveCount > c.MaxReceives {
				reason := m.cur.NackReason(d.Offset) // before the Ack forgets it
				evs, err := m.cur.Ack(now, d.Receipt)
				if err != nil { // the receipt was just issued: state is corrupt
					r.Err = fmt.Errorf("replqueue: dead-lettering offset %d: %w", d.Offset, err)
					return
				}
				m.dead[d.Offset] = &deadLetter{s: s, count: d.ReceiveCount - 1, firstAt: d.FirstReceivedAt, lastAt: now, reason: reason}
				m.forget(evs)
				r.Dead++
				continue
			}
			want--
			r.Deliveries = append(r.Deliveries, Delivery{Message: s.message(d.Offset),
				Receipt: d.Receipt, ReceiveCount: d.ReceiveCount, FirstReceivedAt: d.FirstReceivedAt,
				Deadline: d.Deadline, FencingToken: d.FencingToken})
		}
		m.fill(now)
	}
}

// DeadLetters returns up to n dead letters waiting for their copy, oldest first.
func (m *Machine) DeadLetters(n int) []DeadLetter {
	m.mu.Lock()
	defer m.mu.Unlock()
	offs := make([]int64, 0, len(m.dead))
	for off := range m.dead {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	out := make([]DeadLetter, 0, min(n, len(offs)))
	for _, off := range offs[:min(n, len(offs))] {
		d := m.dead[off]
		out = append(out, DeadLetter{Message: d.s.message(off), ReceiveCount: d.count,
			FirstReceivedAt: d.firstAt, LastReceivedAt: d.lastAt, NackReason: d.reason})
	}
	return out
}
