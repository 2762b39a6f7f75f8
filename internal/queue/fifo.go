package queue

import "sort"

// FIFO groups. In a FIFO queue every known, unfinished message sits in its group's list in
// offset order. Only the head of a group is ever placed in a heap (ready or timer): while the
// head is in flight, waiting out a nack delay, or waiting out its send delay, the rest of the
// group is blocked, which is exactly "order holds through failures". When the head finishes
// (acked, dead-lettered, expired) the next one becomes the head in the same step.
//
// Blocked messages stay in the lookahead window and count against Config.Lookahead. If the
// whole window is blocked, Wants is 0 and nothing further is read from the log until a head
// finishes or its visibility runs out: the head-of-line limit, the same trade SQS FIFO makes.

type group struct {
	q []*entry // unfinished messages of the group, in offset order; q[0] is the head
}

func (c *Cursor) isHead(e *entry) bool {
	g := c.groups[e.group]
	return g != nil && len(g.q) > 0 && g.q[0] == e
}

// joinGroup inserts a new entry in offset order. In the live path it is always appended; a
// replay can create a group's head from its Delivered event while later members are re-read.
func (c *Cursor) joinGroup(e *entry) {
	g := c.groups[e.group]
	if g == nil {
		g = &group{}
		c.groups[e.group] = g
	}
	if n := len(g.q); n == 0 || g.q[n-1].off < e.off {
		g.q = append(g.q, e)
		return
	}
	i := sort.Search(len(g.q), func(i int) bool { return g.q[i].off > e.off })
	var old *entry
	if i == 0 {
		old = g.q[0]
		c.unlink(old)
	}
	g.q = append(g.q, nil)
	copy(g.q[i+1:], g.q[i:])
	g.q[i] = e
	if old != nil {
		c.link(old) // it is no longer the head: blocked
	}
}

// leaveGroup removes an entry that is already unlinked; if it was the head, the next member is
// promoted to head and placed by its own time.
func (c *Cursor) leaveGroup(e *entry) {
	g := c.groups[e.group]
	if g == nil {
		return
	}
	i := 0
	for i < len(g.q) && g.q[i] != e {
		i++
	}
	if i == len(g.q) {
		return
	}
	copy(g.q[i:], g.q[i+1:])
	g.q[len(g.q)-1] = nil
	g.q = g.q[:len(g.q)-1]
	if len(g.q) == 0 {
		delete(c.groups, e.group) // an idle group costs nothing
		return
	}
	if i == 0 {
		h := g.q[0]
		c.unlink(h)
		c.link(h)
	}
}
