package queue

import "time"

// NextDue is the earliest moment a message now waiting (send delay, nack delay or an
// in-flight visibility deadline) becomes visible, and false when nothing waits. A long-poll
// receive sleeps until then at the latest, so it wakes for a redelivery without polling.
func (c *Cursor) NextDue() (time.Time, bool) {
	e := c.timer.peek()
	if e == nil {
		return time.Time{}, false
	}
	return nt(e.at), true
}
