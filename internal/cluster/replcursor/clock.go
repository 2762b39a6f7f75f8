package replcursor

import "time"

// Clock is a group's time as apply sees it: the latest stamp applied, never moving back.
// The proposing node stamps each command with its own clock (Stamp); apply advances to
// max(stamp, last applied time). A new leader whose clock runs behind sees the group's time
// stand still until its clock catches up, so no deadline set under the old one passes
// early. (A clock running ahead moves the time forward for good: a documented limit.)
type Clock struct{ now int64 } // unix ns

// Advance applies a command's stamp and returns the group's time for it.
func (c *Clock) Advance(stamp time.Time) time.Time {
	c.now = max(c.now, stamp.UnixNano())
	return time.Unix(0, c.now).UTC()
}

// Now is the latest applied time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.now).UTC() }

// Set restores the time from a snapshot.
func (c *Clock) Set(unixNano int64) { c.now = unixNano }

// UnixNano is the latest applied time, for a snapshot.
func (c *Clock) UnixNano() int64 { return c.now }

// Stamp is what a proposer stamps: its clock, but never earlier than the group's last
// applied time (apply clamps anyway; this keeps the stamp honest).
func Stamp(clock func() time.Time, last time.Time) time.Time {
	now := clock().UTC()
	if now.Before(last) {
		return last
	}
	return now
}
