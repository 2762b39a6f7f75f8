package queue

import (
	"bytes"
	"testing"
	"time"
)

// Peek reports each message's state as a receive would see it, and changes
// nothing: the cursor's snapshot, its read position and what it wants are
// the same after every peek, even of a message whose visibility just ended.
func TestPeekReportsStatesAndChangesNothing(t *testing.T) {
	c := mustNew(t, Config{Visibility: 10 * time.Second, Lookahead: 3})
	l := &testLog{}
	for range 3 {
		l.send(at(0), "", 0)
	}
	l.send(at(0), "", time.Minute) // 3: a delayed send
	l.send(at(0), "", 0)           // 4: beyond the lookahead: not read yet
	fill(c, l, at(0))
	ds, _, err := c.Receive(at(1), 2, 0) // 0 and 1 in flight until 11
	if err != nil || len(ds) != 2 {
		t.Fatalf("receive: %v %v", ds, err)
	}
	if _, err := c.Ack(at(1), ds[0].Receipt); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		now  time.Time
		off  int64
		want Peeked
	}{
		{at(2), 0, Peeked{State: PeekDone}},
		{at(2), 1, Peeked{State: PeekInFlight, ReceiveCount: 1, VisibleAt: at(11)}},
		{at(11), 1, Peeked{State: PeekVisible, ReceiveCount: 1}}, // its time has come, unmoved
		{at(2), 2, Peeked{State: PeekVisible}},
		{at(2), 3, Peeked{State: PeekDelayed, VisibleAt: at(60)}},
		{at(2), 4, Peeked{State: PeekVisible}},
		{at(4 * 24 * 3600), 4, Peeked{State: PeekDone}}, // past retention: the next read drops it
	}
	for _, tc := range tests {
		before, rp, wants := c.Snapshot(), c.ReadPos(), c.Wants()
		if got := c.Peek(tc.now, l.metas[tc.off]); got != tc.want {
			t.Errorf("Peek(%d) at %v = %+v, want %+v", tc.off, tc.now.Sub(t0), got, tc.want)
		}
		if !bytes.Equal(before, c.Snapshot()) || rp != c.ReadPos() || wants != c.Wants() {
			t.Errorf("Peek(%d) changed the cursor", tc.off)
		}
	}
}

// A FIFO message behind its group's head is blocked.
func TestPeekFIFOBlocked(t *testing.T) {
	c := mustNew(t, Config{FIFO: true})
	l := &testLog{}
	l.send(at(0), "g", 0)
	l.send(at(0), "g", 0)
	fill(c, l, at(0))
	if _, _, err := c.Receive(at(0), 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.Peek(at(0), l.metas[1]); got.State != PeekBlocked {
		t.Errorf("second of the group: %v, want blocked", got.State)
	}
	if got := c.Peek(at(0), l.metas[0]).State.String(); got != "in_flight" {
		t.Errorf("head: %s, want in_flight", got)
	}
}
