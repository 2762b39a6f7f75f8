package replpart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
)

const testSub = 7

// cursorAt proposes a cursor entry through node at's Partition, ticking until it answers.
func (c *cluster) cursorAt(at multiraft.NodeID, e CursorEntry) ([]queue.Delivery, error) {
	c.t.Helper()
	cl, err := c.nodes[at].part.startCursor(e)
	if err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		select {
		case <-cl.p.Done():
			r, err := c.nodes[at].part.finishCursor(cl)
			if err != nil {
				return nil, err
			}
			return r.Deliveries, r.Err
		default:
		}
		if i == 200 {
			c.t.Fatalf("n%d: cursor entry not answered in 200 ticks", at)
		}
		c.tick()
	}
}

func createAt(sub uint64, earliest bool) CursorEntry {
	return CursorEntry{Sub: sub, Kind: CursorCreate, Config: CursorConfig{
		Queue: queue.Config{Visibility: time.Minute, Retention: 24 * time.Hour}, FromEarliest: earliest}}
}

func receiveOf(sub uint64, n int) CursorEntry {
	return CursorEntry{Sub: sub, Kind: replcursor.Receive, Op: replcursor.Op{Max: n}}
}

func ackOf(sub uint64, receipt string) CursorEntry {
	return CursorEntry{Sub: sub, Kind: replcursor.Ack, Op: replcursor.Op{Receipt: receipt}}
}

func offsets(ds []queue.Delivery) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.Offset)
	}
	return out
}

// cursorsAgree ticks until every up node holds the same cursors as the leader (bounded).
func (c *cluster) cursorsAgree() []CursorState {
	c.t.Helper()
	for range 300 {
		l := c.elect()
		want := c.nodes[l].sm.Cursors()
		same := true
		for _, nd := range c.up() {
			same = same && equalCursors(nd.sm.Cursors(), want)
		}
		if same {
			return want
		}
		c.tick()
	}
	l := c.leader()
	for _, nd := range c.up() {
		if got := nd.sm.Cursors(); !equalCursors(got, c.nodes[l].sm.Cursors()) {
			c.t.Fatalf("n%d's cursors differ from leader n%d's after 300 ticks: %+v vs %+v", nd.id, l, got, c.nodes[l].sm.Cursors())
		}
	}
	return nil
}

func equalCursors(a, b []CursorState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Sub != b[i].Sub || !bytes.Equal(a[i].Snapshot, b[i].Snapshot) || fmt.Sprint(a[i].Dead) != fmt.Sprint(b[i].Dead) {
			return false
		}
	}
	return true
}

// appendN appends n one-record batches on the leader.
func (c *cluster) appendN(from, n int) {
	c.t.Helper()
	for i := from; i < from+n; i++ {
		c.mustAppend(fmt.Sprintf("r%02d", i%100)) // 3 bytes: one record each
	}
}

// TestCursorReplicated: a subscription's cursor created, received from and acked through
// the leader is the same cursor on every replica (snapshots byte for byte); a follower
// answers NOT_LEADER; refusals (an acked receipt again, a second create, an unknown
// subscription) reach the proposer.
func TestCursorReplicated(t *testing.T) {
	c := newCluster(t, 11, 3)
	c.appendN(0, 3)
	l := c.elect()
	if _, err := c.cursorAt(l, createAt(testSub, true)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cursorAt(l, createAt(testSub, true)); !errors.Is(err, ErrCursorExists) {
		t.Fatalf("second create: %v, want ErrCursorExists", err)
	}
	if _, err := c.cursorAt(l, createAt(testSub+1, false)); err != nil { // at the end: 3
		t.Fatal(err)
	}
	c.appendN(3, 7)
	ds, err := c.cursorAt(l, receiveOf(testSub, 4))
	if err != nil || fmt.Sprint(offsets(ds)) != "[0 1 2 3]" {
		t.Fatalf("receive: %v %v, want offsets 0-3", offsets(ds), err)
	}
	late, err := c.cursorAt(l, receiveOf(testSub+1, 100))
	if err != nil || fmt.Sprint(offsets(late)) != "[3 4 5 6 7 8 9]" {
		t.Fatalf("receive from the subscription created at offset 3: %v %v", offsets(late), err)
	}
	for _, d := range ds[:2] {
		if _, err := c.cursorAt(l, ackOf(testSub, d.Receipt)); err != nil {
			t.Fatalf("ack %d: %v", d.Offset, err)
		}
	}
	if _, err := c.cursorAt(l, ackOf(testSub, ds[0].Receipt)); !errors.Is(err, queue.ErrReceiptStale) {
		t.Fatalf("ack again: %v, want ErrReceiptStale", err)
	}
	if _, err := c.cursorAt(l, receiveOf(99, 1)); !errors.Is(err, ErrCursorNotFound) {
		t.Fatalf("unknown subscription: %v, want ErrCursorNotFound", err)
	}
	for _, nd := range c.up() {
		if nd.id == l {
			continue
		}
		_, err := nd.part.Receive(context.Background(), testSub, 1, 0)
		var nl *NotLeaderError
		if !errors.As(err, &nl) || nl.Leader != l {
			t.Fatalf("n%d: receive on a follower: %v, want NotLeaderError naming n%d", nd.id, err, l)
		}
	}
	cs := c.cursorsAgree()
	if len(cs) != 2 || cs[0].Floor != 2 {
		t.Fatalf("cursors %+v, want 2 with the first's floor at 2", cs)
	}
	if _, err := c.cursorAt(l, CursorEntry{Sub: testSub + 1, Kind: CursorDelete}); err != nil {
		t.Fatal(err)
	}
	if cs := c.cursorsAgree(); len(cs) != 1 {
		t.Fatalf("after the delete: %+v", cs)
	}
}

// TestCursorLeaseSurvivesFailover: records received on a leader that is then killed keep
// their leases on the new leader (the Receive committed, so its receipts are every
// replica's): acks with them succeed there, the records are not delivered again, and a
// record received but not acked comes back only once its visibility ran out.
func TestCursorLeaseSurvivesFailover(t *testing.T) {
	c := newCluster(t, 12, 3)
	l := c.elect()
	if _, err := c.cursorAt(l, createAt(testSub, true)); err != nil {
		t.Fatal(err)
	}
	c.appendN(0, 6)
	ds, err := c.cursorAt(l, receiveOf(testSub, 4))
	if err != nil || len(ds) != 4 {
		t.Fatalf("receive: %v %v", offsets(ds), err)
	}
	if _, err := c.cursorAt(l, ackOf(testSub, ds[0].Receipt)); err != nil {
		t.Fatal(err)
	}
	c.kill(l)
	nl := c.elect(l)
	for _, d := range ds[1:3] {
		if _, err := c.cursorAt(nl, ackOf(testSub, d.Receipt)); err != nil {
			t.Fatalf("ack of offset %d, received on the old leader, on the new: %v", d.Offset, err)
		}
	}
	more, err := c.cursorAt(nl, receiveOf(testSub, 10))
	if err != nil || fmt.Sprint(offsets(more)) != "[4 5]" {
		t.Fatalf("receive on the new leader: %v %v, want [4 5] (0-3 are leased or acked)", offsets(more), err)
	}
	c.clock = c.clock.Add(2 * time.Minute) // past the visibility of offset 3's lease
	again, err := c.cursorAt(nl, receiveOf(testSub, 10))
	if err != nil || fmt.Sprint(offsets(again)) != "[3 4 5]" || again[0].ReceiveCount != 2 {
		t.Fatalf("after the visibility: %v %v, want [3 4 5], offset 3 a second time", offsets(again), err)
	}
	if _, err := c.cursorAt(nl, ackOf(testSub, ds[3].Receipt)); !errors.Is(err, queue.ErrReceiptStale) {
		t.Fatalf("the old lease of a redelivered record: %v, want stale (fenced by the new delivery)", err)
	}
	c.start(l)
	c.cursorsAgree()
}

// TestCursorSeededBySnapshot: a follower cut off while its leader applies cursor events
// among 100 produces (a snapshot every 20, the Raft log compacted behind them) is sent a
// snapshot: it gets the cursor with the checkpoint, pulls the records, and holds the
// leader's cursor byte for byte; made leader, it honours the leases the old one handed out.
func TestCursorSeededBySnapshot(t *testing.T) {
	c := newCluster(t, 13, 3, chunked(40))
	leader := c.elect()
	lag := c.others(leader)[0]
	c.net.Partition(c.others(lag), []multiraft.NodeID{lag})
	if _, err := c.cursorAt(leader, createAt(testSub, true)); err != nil {
		t.Fatal(err)
	}
	c.appendN(0, 50)
	ds, err := c.cursorAt(leader, receiveOf(testSub, 10))
	if err != nil || len(ds) != 10 {
		t.Fatalf("receive: %v %v", offsets(ds), err)
	}
	if _, err := c.cursorAt(leader, ackOf(testSub, ds[0].Receipt)); err != nil {
		t.Fatal(err)
	}
	c.appendN(50, 50)
	c.net.Heal()
	c.converge()
	c.cursorsAgree()
	if c.sentSnapshots() == 0 || c.nodes[lag].log.pulled == 0 {
		t.Fatalf("%d snapshots sent, %d batches pulled: the follower was not seeded by a snapshot", c.sentSnapshots(), c.nodes[lag].log.pulled)
	}
	if err := c.nodes[leader].host.TransferLeadership(testGroup, lag); err != nil {
		t.Fatal(err)
	}
	for i := 0; c.leader() != lag; i++ {
		if i == 200 {
			t.Fatal("the follower did not take the leadership")
		}
		c.tick()
	}
	if _, err := c.cursorAt(lag, ackOf(testSub, ds[1].Receipt)); err != nil {
		t.Fatalf("ack on the seeded replica of a lease the old leader gave: %v", err)
	}
	if _, err := c.cursorAt(lag, ackOf(testSub, ds[0].Receipt)); !errors.Is(err, queue.ErrReceiptStale) {
		t.Fatalf("ack of a record acked before the seeding: %v, want stale", err)
	}
	rest, err := c.cursorAt(lag, receiveOf(testSub, 1000))
	if err != nil || len(rest) != 90 || rest[0].Offset != 10 {
		t.Fatalf("receive on the seeded replica: %d records from %v, %v; want the 90 never received", len(rest), offsets(rest[:min(1, len(rest))]), err)
	}
}

// TestCursorRestartReappliesPastCheckpoint: a leader killed with cursor events applied past
// its last snapshot restarts on that snapshot's cursors and re-applies the rest: it ends
// with the others' cursor, byte for byte.
func TestCursorRestartReappliesPastCheckpoint(t *testing.T) {
	c := newCluster(t, 14, 3)
	l := c.elect()
	if _, err := c.cursorAt(l, createAt(testSub, true)); err != nil {
		t.Fatal(err)
	}
	c.appendN(0, 25)
	ds, err := c.cursorAt(l, receiveOf(testSub, 5))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds[:3] {
		if _, err := c.cursorAt(l, ackOf(testSub, d.Receipt)); err != nil {
			t.Fatal(err)
		}
	}
	c.kill(l)
	c.elect(l)
	c.start(l)
	cs := c.cursorsAgree()
	if len(cs) != 1 || cs[0].Floor != 3 {
		t.Fatalf("cursors %+v, want one with its floor at 3", cs)
	}
}
