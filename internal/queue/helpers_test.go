package queue

import (
	"testing"
	"time"
)

// t0 is the fake clock's zero: tests count seconds from here.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// testLog stands in for the partition log: the metas of its messages by offset, with gaps.
type testLog struct {
	metas []Meta
	end   int64 // high-water mark
}

func (l *testLog) send(now time.Time, group string, delay time.Duration) int64 {
	off := l.end
	l.metas = append(l.metas, Meta{Offset: off, GroupID: group, SentAt: now, AvailableAt: now.Add(delay)})
	l.end++
	return off
}

// gap appends offsets that hold no message (control records, say).
func (l *testLog) gap(n int) { l.end += int64(n) }

// from returns up to n metas at or after offset off.
func (l *testLog) from(off int64, n int) []Meta {
	i := 0
	for i < len(l.metas) && l.metas[i].Offset < off {
		i++
	}
	return l.metas[i:min(len(l.metas), i+n)]
}

// fill plays the broker: it offers the log to the cursor until it wants no more or the log
// ends, and returns the events to journal.
func fill(c *Cursor, l *testLog, now time.Time) []Event {
	var evs []Event
	for range l.end + 1 { // bounded: every round consumes at least one offset or stops
		want := c.Wants()
		rp := c.ReadPos()
		if want == 0 || rp >= l.end {
			break
		}
		ms := l.from(rp, want)
		if len(ms) == 0 {
			evs = append(evs, c.Skip(l.end)...)
			break
		}
		n, e := c.Offer(now, ms)
		evs = append(evs, e...)
		if n == 0 {
			break
		}
	}
	return evs
}

func mustNew(t testing.TB, cfg Config) *Cursor {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
