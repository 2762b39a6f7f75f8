package replpart

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

func skipOf(sub uint64, to int64) CursorEntry {
	return CursorEntry{Sub: sub, Kind: CursorSkipTo, To: to}
}

// requestSkip runs RequestSkip from node from to node to, ticking the cluster until it
// answers (the serving node proposes and waits for the entry to apply).
func (c *cluster) requestSkip(from, to multiraft.NodeID, sub uint64, offset int64) error {
	c.t.Helper()
	stamp := c.clock // the serving Partition stamps from a goroutine of its own: no shared clock
	c.nodes[to].part.SetClock(func() time.Time { return stamp })
	defer c.nodes[to].part.SetClock(func() time.Time { return c.clock })
	done := make(chan error, 1)
	go func() {
		done <- RequestSkip(context.Background(), c.nodes[from].host, to, testGroup, sub, offset)
	}()
	for range 500 {
		select {
		case err := <-done:
			return err
		default:
		}
		c.tick()
		time.Sleep(time.Millisecond)
	}
	c.t.Fatalf("skip request n%d -> n%d not answered in 500 ticks", from, to)
	return nil
}

// TestCursorSkipTo: a SkipTo entry finishes every record below its offset on every
// replica, delivered or not (a receipt of one goes stale, nothing below is delivered
// again), and reading goes on there; an offset below the start or past the end is refused
// with both bounds and changes nothing; a follower refuses to propose, and a node that
// asks the leader over a request gets the same answers as the leader's own call.
func TestCursorSkipTo(t *testing.T) {
	c := newCluster(t, 21, 3)
	c.appendN(0, 10)
	l := c.elect()
	if _, err := c.cursorAt(l, createAt(testSub, true)); err != nil {
		t.Fatal(err)
	}
	ds, err := c.cursorAt(l, receiveOf(testSub, 4))
	if err != nil || fmt.Sprint(offsets(ds)) != "[0 1 2 3]" {
		t.Fatalf("receive: %v %v", offsets(ds), err)
	}
	if _, err := c.cursorAt(l, skipOf(testSub, 6)); err != nil {
		t.Fatalf("skip to 6: %v", err)
	}
	if _, err := c.cursorAt(l, ackOf(testSub, ds[2].Receipt)); !errors.Is(err, queue.ErrReceiptStale) {
		t.Fatalf("ack of offset 2 after the skip: %v, want ErrReceiptStale", err)
	}
	if cs := c.cursorsAgree(); len(cs) != 1 || cs[0].Floor != 6 {
		t.Fatalf("cursors after the skip: %+v, want the floor at 6 everywhere", cs)
	}

	var follower multiraft.NodeID
	for _, nd := range c.up() {
		if nd.id != l {
			follower = nd.id
		}
	}
	for _, tc := range []struct {
		name  string
		to    int64
		below bool
	}{
		{"below the start", 3, true},
		{"past the end", 11, false},
	} {
		for _, via := range []string{"leader", "request"} {
			var err error
			if via == "leader" {
				_, err = c.cursorAt(l, skipOf(testSub, tc.to))
			} else {
				err = c.requestSkip(follower, l, testSub, tc.to)
			}
			var re *SkipRangeError
			if !errors.As(err, &re) || re.BelowStart() != tc.below || re.Start != 6 || re.End != 10 {
				t.Fatalf("%s through the %s: %v, want a SkipRangeError with start 6, end 10", tc.name, via, err)
			}
		}
	}
	if err := c.nodes[follower].part.SkipCursor(context.Background(), testSub, 8); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("skip on a follower: %v, want NOT_LEADER", err)
	}
	var nl *NotLeaderError
	if err := c.requestSkip(l, follower, testSub, 8); !errors.As(err, &nl) || nl.Leader != l {
		t.Fatalf("skip asked of a follower: %v, want NotLeaderError naming n%d", err, l)
	}
	if err := c.requestSkip(follower, l, testSub+1, 8); !errors.Is(err, ErrCursorNotFound) {
		t.Fatalf("skip of an unknown subscription: %v, want ErrCursorNotFound", err)
	}
	if err := c.requestSkip(follower, l, testSub, 8); err != nil {
		t.Fatalf("skip to 8 asked of the leader: %v", err)
	}
	got, err := c.cursorAt(l, receiveOf(testSub, 10))
	if err != nil || fmt.Sprint(offsets(got)) != "[8 9]" {
		t.Fatalf("receive after the skips: %v %v, want [8 9]", offsets(got), err)
	}
	if err := c.requestSkip(follower, l, testSub, 10); err != nil { // the end itself: nothing left
		t.Fatalf("skip to the end: %v", err)
	}
	if cs := c.cursorsAgree(); len(cs) != 1 || cs[0].Floor != 10 {
		t.Fatalf("cursors at the end: %+v, want the floor at 10 everywhere", cs)
	}
	c.kill(l) // the skips are the group's: a new leader has them
	nl2 := c.elect(l)
	c.appendN(10, 2)
	if got, err := c.cursorAt(nl2, receiveOf(testSub, 10)); err != nil || fmt.Sprint(offsets(got)) != "[10 11]" {
		t.Fatalf("receive on the new leader: %v %v, want [10 11]", offsets(got), err)
	}
}

// FuzzSkipMessages: no input panics the skip request's or response's decoder; an accepted
// request re-encodes to one that decodes the same.
func FuzzSkipMessages(f *testing.F) {
	f.Add(encodeSkipRequest(7, 1<<40))
	f.Add(encodeSkipResponse(skipOutOfRange, 3, 10))
	f.Add(encodeSkipResponse(skipNotLeader, 2, 0))
	f.Add([]byte{pullVersion, skipKind, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if sub, to, err := decodeSkipRequest(b); err == nil {
			if to < 0 {
				t.Fatalf("accepted offset %d", to)
			}
			if sub2, to2, err := decodeSkipRequest(encodeSkipRequest(sub, to)); err != nil || sub2 != sub || to2 != to {
				t.Fatalf("round trip of (%d, %d): (%d, %d) %v", sub, to, sub2, to2, err)
			}
		} else if !errors.Is(err, ErrBadSkip) {
			t.Fatalf("refusal %v is not ErrBadSkip", err)
		}
		err := decodeSkipResponse(b, 5)
		var re *SkipRangeError
		if errors.As(err, &re) && (re.Start < 0 || re.End < 0) {
			t.Fatalf("negative bounds %+v", re)
		}
	})
}
