package queue

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testrace"
)

// TestMemoryBounded streams a million messages through the cursor while consumers ack, some
// late: what the cursor holds must follow the window and the messages in flight, never the
// number of messages that went through. It asserts sizes, not timings.
func TestMemoryBounded(t *testing.T) {
	testrace.NotUnderRace(t)
	for _, fifo := range []bool{false, true} {
		total := int64(1_000_000)
		if fifo || testing.Short() {
			total = 200_000 // FIFO costs the same per message; a fifth is enough to show the bound
		}
		const window = 1024
		c := mustNew(t, Config{Lookahead: window, FIFO: fifo})
		var late []string // receipts acked a while later, so acks arrive out of order
		next := int64(0)
		metas := make([]Meta, 0, window)
		groups := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		now := t0
		for step := int64(0); c.Floor() < total && step < 4*total; step++ {
			now = now.Add(time.Millisecond)
			metas = metas[:0]
			for range c.Wants() {
				if next == total {
					break
				}
				metas = append(metas, Meta{Offset: next, GroupID: groups[next%8], SentAt: now})
				next++
			}
			if n, _ := c.Offer(now, metas); n != len(metas) {
				t.Fatalf("offer took %d of %d within Wants", n, len(metas))
			}
			ds, _, _ := c.Receive(now, 32, 0)
			for _, d := range ds {
				if d.Offset%97 == 0 {
					late = append(late, d.Receipt)
					continue
				}
				if _, err := c.Ack(now, d.Receipt); err != nil {
					t.Fatal(err)
				}
			}
			if len(late) > 64 || len(ds) == 0 {
				for _, r := range late {
					if _, err := c.Ack(now, r); err != nil {
						t.Fatal(err)
					}
				}
				late = late[:0]
			}
			checkBounded(t, c, window)
		}
		if c.Floor() != total || len(c.msgs) != 0 || len(c.groups) != 0 {
			t.Fatalf("fifo=%v: floor %d, held %d, groups %d", fifo, c.Floor(), len(c.msgs), len(c.groups))
		}
	}
}

func checkBounded(t *testing.T, c *Cursor, window int) {
	const inFlight = 64 + 32 // late receipts plus one receive
	held := len(c.msgs)
	switch {
	case held > window+inFlight:
		t.Fatalf("holds %d messages", held)
	case len(c.done.runs) > held+1: // each run ends at an unfinished message, or is the last
		t.Fatalf("%d done runs", len(c.done.runs))
	case cap(c.ready.es) > 4*window || cap(c.timer.es) > 4*window:
		t.Fatalf("heap capacities %d, %d", cap(c.ready.es), cap(c.timer.es))
	case len(c.groups) > 8:
		t.Fatalf("%d groups", len(c.groups))
	}
}

// TestMapShrinksAfterBurst: after a burst of many messages in flight, all acked, the cursor
// gives the memory back.
func TestMapShrinksAfterBurst(t *testing.T) {
	c := mustNew(t, Config{Lookahead: MaxLookahead})
	var metas []Meta
	for i := range int64(50_000) {
		metas = append(metas, Meta{Offset: i, SentAt: t0})
	}
	c.Offer(t0, metas)
	ds, _, _ := c.Receive(t0, len(metas), 0)
	for _, d := range ds {
		if _, err := c.Ack(t0, d.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	if c.peak > 4096 || cap(c.ready.es) > 1024 || cap(c.timer.es) > 1024 || c.Floor() != 50_000 {
		t.Fatalf("after the burst: peak %d, heap caps %d %d", c.peak, cap(c.ready.es), cap(c.timer.es))
	}
}
