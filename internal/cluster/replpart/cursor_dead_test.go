package replpart

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
)

func receiveLimitedOf(sub uint64, n, limit int) CursorEntry {
	return CursorEntry{Sub: sub, Kind: CursorReceiveLimited, Op: replcursor.Op{Max: n}, Limit: limit}
}

// TestCursorDeadLetters: a limited Receive moves a record received more than the limit
// to the cursor's dead letters on every replica and delivers the next in its place; the
// dead letters survive the leader's death (the new leader lists them), a restart from
// snapshot and log, and go on every replica with a DeadDone (one naming an offset already
// done changes nothing). Entries a replica could not decode are refused before proposing.
func TestCursorDeadLetters(t *testing.T) {
	c := newCluster(t, 21, 3)
	l := c.elect()
	if _, err := c.cursorAt(l, createAt(testSub, true)); err != nil {
		t.Fatal(err)
	}
	c.appendN(0, 3)
	// Offset 0 is received twice (its visibility runs out in between), 1 and 2 are acked.
	first, err := c.cursorAt(l, receiveLimitedOf(testSub, 3, 2))
	if err != nil || fmt.Sprint(offsets(first)) != "[0 1 2]" {
		t.Fatalf("receive: %v %v", offsets(first), err)
	}
	for _, d := range first[1:] {
		if _, err := c.cursorAt(l, ackOf(testSub, d.Receipt)); err != nil {
			t.Fatal(err)
		}
	}
	c.clock = c.clock.Add(2 * time.Minute)
	if ds, err := c.cursorAt(l, receiveLimitedOf(testSub, 1, 2)); err != nil || len(ds) != 1 || ds[0].ReceiveCount != 2 {
		t.Fatalf("second receive of offset 0: %+v %v", ds, err)
	}
	c.appendN(3, 1)
	c.clock = c.clock.Add(2 * time.Minute)
	// The third receive of offset 0 passes the limit of 2: dead-lettered, 3 delivered.
	ds, err := c.cursorAt(l, receiveLimitedOf(testSub, 1, 2))
	if err != nil || fmt.Sprint(offsets(ds)) != "[3]" {
		t.Fatalf("receive past the limit: %v %v, want offset 3 alone", offsets(ds), err)
	}
	cs := c.cursorsAgree()
	if len(cs) != 1 || fmt.Sprint(cs[0].Dead) != "[{0 2}]" {
		t.Fatalf("cursors %+v, want offset 0 dead after 2 receives", cs)
	}
	if cs[0].Floor != 3 {
		t.Fatalf("floor %d, want 3: a dead letter is finished in the cursor", cs[0].Floor)
	}

	c.kill(l)
	nl := c.elect(l)
	if got := c.nodes[nl].sm.DeadLetters(testSub, 10); fmt.Sprint(got) != "[{0 2}]" {
		t.Fatalf("the new leader's dead letters: %v", got)
	}
	c.appendN(4, 25) // past a snapshot: the restart restores it, then the log after it
	c.start(l)
	c.cursorsAgree()
	if _, err := c.cursorAt(nl, CursorEntry{Sub: testSub, Kind: CursorDeadDone, Offsets: []int64{0, 7}}); err != nil {
		t.Fatal(err)
	}
	if cs := c.cursorsAgree(); len(cs[0].Dead) != 0 {
		t.Fatalf("after DeadDone: %+v", cs[0].Dead)
	}

	for _, bad := range []CursorEntry{
		receiveLimitedOf(testSub, 1, 0),
		receiveLimitedOf(testSub, 1, MaxReceiveLimit+1),
		receiveLimitedOf(testSub, 0, 2),
		{Sub: testSub, Kind: CursorDeadDone},
		{Sub: testSub, Kind: CursorDeadDone, Offsets: []int64{-1}},
		{Sub: testSub, Kind: CursorDeadDone, Offsets: make([]int64, MaxDeadDone+1)},
	} {
		if _, err := c.nodes[nl].part.startCursor(bad); !errors.Is(err, ErrBadAppend) {
			t.Errorf("%+v: %v, want ErrBadAppend", bad, err)
		}
	}
}

// TestSnapshotKeepsDeadLetters: a snapshot of cursors with dead letters (version 3)
// decodes to the same dead letters; one without any stays version 2, which older nodes
// read.
func TestSnapshotKeepsDeadLetters(t *testing.T) {
	cur, err := queue.New(queue.Config{Visibility: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMachine(1, nil)
	m.cursors[5] = &subCursor{cur: cur, cfg: CursorConfig{Queue: queue.Config{Visibility: time.Minute}}}
	if b := m.encodeSnapshot([]byte("cp")); b[0] != snapVersionCursors {
		t.Fatalf("snapshot without dead letters is version %d, want %d", b[0], snapVersionCursors)
	}
	m.cursors[5].dead = map[int64]int{9: 3, 4: 1}
	b := m.encodeSnapshot([]byte("cp"))
	if b[0] != snapVersionDead {
		t.Fatalf("version %d, want %d", b[0], snapVersionDead)
	}
	p, err := decodeSnapshot(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p.cursors[5].deadLetters(10)); got != "[{4 1} {9 3}]" {
		t.Fatalf("decoded dead letters %s", got)
	}
	for cut := 1; cut < len(b); cut++ {
		if _, err := decodeSnapshot(b[:cut], true); err == nil {
			t.Fatalf("a snapshot cut to %d of %d bytes decoded", cut, len(b))
		}
	}
}

// TestCursorDeadLetterByReceipt: a DeadLetter entry finishes the delivery its receipt
// names and keeps it among the dead letters on every replica, with the receives it had; a
// stale receipt is refused and keeps nothing; the new leader after a kill has the dead
// letter, and a DeadDone drops it.
func TestCursorDeadLetterByReceipt(t *testing.T) {
	c := newCluster(t, 23, 3)
	c.appendN(0, 3)
	l := c.elect()
	if _, err := c.cursorAt(l, createAt(testSub, true)); err != nil {
		t.Fatal(err)
	}
	ds, err := c.cursorAt(l, receiveOf(testSub, 2))
	if err != nil || len(ds) != 2 {
		t.Fatalf("receive: %v %v", offsets(ds), err)
	}
	deadOf := func(r string) CursorEntry {
		return CursorEntry{Sub: testSub, Kind: CursorDeadLetter, Op: replcursor.Op{Receipt: r}}
	}
	if _, err := c.cursorAt(l, deadOf(ds[1].Receipt)); err != nil {
		t.Fatalf("dead letter of offset 1: %v", err)
	}
	if _, err := c.cursorAt(l, deadOf(ds[1].Receipt)); !errors.Is(err, queue.ErrReceiptStale) {
		t.Fatalf("dead letter again: %v, want ErrReceiptStale", err)
	}
	if _, err := c.cursorAt(l, ackOf(testSub, ds[0].Receipt)); err != nil {
		t.Fatal(err)
	}
	c.cursorsAgree()
	c.kill(l)
	nl := c.elect(l)
	if got := c.nodes[nl].sm.DeadLetters(testSub, 10); fmt.Sprint(got) != "[{1 1}]" {
		t.Fatalf("dead letters on the new leader: %v, want offset 1 with 1 receive", got)
	}
	if more, err := c.cursorAt(nl, receiveOf(testSub, 10)); err != nil || fmt.Sprint(offsets(more)) != "[2]" {
		t.Fatalf("receive after: %v %v, want only 2 (0 acked, 1 dead)", offsets(more), err)
	}
	if _, err := c.cursorAt(nl, CursorEntry{Sub: testSub, Kind: CursorDeadDone, Offsets: []int64{1}}); err != nil {
		t.Fatal(err)
	}
	if n := c.nodes[nl].sm.DeadCount(testSub); n != 0 {
		t.Fatalf("%d dead letters after DeadDone", n)
	}
}
