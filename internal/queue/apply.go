package queue

import "fmt"

// Apply changes the cursor by one event. The cursor's own calls go through it too, so a replay
// of the journal takes exactly the steps the live cursor took. An event that does not fit the
// state (for example an Acked for a message the cursor does not hold) returns an error
// wrapping ErrBadEvent and changes nothing.
func (c *Cursor) Apply(ev Event) error {
	switch ev := ev.(type) {
	case Delivered:
		return c.applyDelivered(ev)
	case Acked:
		return c.finish(ev.Offset, false)
	case DeadLettered:
		return c.finish(ev.Offset, true)
	case Extended:
		return c.update(ev.Offset, func(e *entry) { e.at = tn(ev.Deadline) })
	case Nacked:
		return c.update(ev.Offset, func(e *entry) {
			e.at, e.inFlight, e.reason = tn(ev.AvailableAt), false, ev.Reason
		})
	case Expired:
		if ev.From < 0 || ev.To < ev.From {
			return fmt.Errorf("%w: range [%d, %d)", ErrBadEvent, ev.From, ev.To)
		}
		c.finishRange(ev.From, ev.To)
		c.ctr.expired += uint64(ev.To - ev.From)
	case Skipped:
		if ev.From < 0 || ev.To < ev.From {
			return fmt.Errorf("%w: range [%d, %d)", ErrBadEvent, ev.From, ev.To)
		}
		c.finishRange(ev.From, ev.To)
	case Purged:
		c.finishRange(c.done.floor, ev.UpTo)
		c.readPos = max(c.readPos, ev.UpTo)
		c.ctr.purges++
	default:
		return fmt.Errorf("%w: unknown event %T", ErrBadEvent, ev)
	}
	return nil
}

func (c *Cursor) applyDelivered(ev Delivered) error {
	if ev.Offset < 0 || ev.Count < 1 || ev.Token == 0 {
		return fmt.Errorf("%w: delivered %+v", ErrBadEvent, ev)
	}
	e := c.msgs[ev.Offset]
	if e == nil {
		if c.done.contains(ev.Offset) {
			return fmt.Errorf("%w: delivered offset %d is done", ErrBadEvent, ev.Offset)
		}
		// A replay meets the message first here: its buffered state was never journaled.
		e = &entry{off: ev.Offset, group: ev.GroupID, sentAt: tn(ev.SentAt)}
		c.hold(e)
	}
	c.unlink(e)
	e.token, e.count = ev.Token, int32(ev.Count)
	e.firstAt, e.lastAt, e.at = tn(ev.FirstAt), tn(ev.At), tn(ev.Deadline)
	e.inFlight = true
	c.link(e)
	c.token = max(c.token, ev.Token)
	c.ctr.receives++
	if ev.Count > 1 {
		c.ctr.redeliveries++
	}
	return nil
}

// update changes a held message in place, re-placing it since its time may have moved.
func (c *Cursor) update(off int64, f func(*entry)) error {
	e := c.msgs[off]
	if e == nil || e.count == 0 {
		return fmt.Errorf("%w: offset %d is not delivered", ErrBadEvent, off)
	}
	c.unlink(e)
	f(e)
	c.link(e)
	return nil
}

func (c *Cursor) finish(off int64, deadLetter bool) error {
	e := c.msgs[off]
	if e == nil && deadLetter && c.done.contains(off) {
		// The broker journals a dead letter once its copy is durable, so a purge or an expiry
		// of the same message can come first in the journal. The copy happened: count it.
		c.ctr.deadLettered++
		return nil
	}
	if e == nil || e.count == 0 && !deadLetter {
		return fmt.Errorf("%w: offset %d is not delivered", ErrBadEvent, off)
	}
	c.drop(e)
	c.done.add(off, off+1)
	if deadLetter {
		c.ctr.deadLettered++
	} else {
		c.ctr.acks++
	}
	return nil
}

// finishRange marks [a, b) done and forgets any held message in it. It walks whichever is
// smaller, the range or the held messages, so a purge of a huge backlog stays cheap.
func (c *Cursor) finishRange(a, b int64) {
	if b <= a {
		return
	}
	if b-a <= int64(len(c.msgs)) {
		for off := a; off < b; off++ {
			if e := c.msgs[off]; e != nil {
				c.drop(e)
			}
		}
	} else {
		var hit []*entry
		for off, e := range c.msgs {
			if off >= a && off < b {
				hit = append(hit, e)
			}
		}
		for _, e := range hit {
			c.drop(e)
		}
	}
	c.done.add(a, b)
}
