package replpart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// errTrimPastEnd is the fake log's refusal of a trim past its end.
var errTrimPastEnd = errors.New("fake: trim past the end")

// Trim makes the fake a Trimmer. Like the broker's log (storage.Log.RaiseStart) it moves
// the start in memory only: the durable copy keeps the records until the next Checkpoint,
// so a crash before it brings them back.
func (l *fakeLog) Trim(off int64) (TrimResult, error) {
	l.mu.Lock()
	end, start := l.next, l.start
	l.mu.Unlock()
	if off == TrimToEnd {
		off = end
	}
	if off > end {
		return TrimResult{Cut: off, Start: start, Err: fmt.Errorf("%w: %d, end %d", errTrimPastEnd, off, end)}, nil
	}
	if off > start {
		l.deleteBelow(off)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return TrimResult{Cut: off, Start: l.start}, nil
}

// trimAt proposes a trim through node at's Partition, ticking until it answers.
func (c *cluster) trimAt(at multiraft.NodeID, off int64) (TrimResult, error) {
	c.t.Helper()
	cl, err := c.nodes[at].part.startTrim(off)
	if err != nil {
		return TrimResult{}, err
	}
	for i := 0; ; i++ {
		select {
		case <-cl.p.Done():
			return c.nodes[at].part.finishTrim(cl)
		default:
		}
		if i == 200 {
			c.t.Fatalf("n%d: trim not answered in 200 ticks", at)
		}
		c.tick()
	}
}

// starts is every up node's log start.
func (c *cluster) starts() map[multiraft.NodeID]int64 {
	out := map[multiraft.NodeID]int64{}
	for _, nd := range c.up() {
		s, _ := nd.log.Bounds()
		out[nd.id] = s
	}
	return out
}

// TestTrimOnEveryReplica: a trim through the leader moves every replica's log start to the
// same offset and finishes what the subscription's cursor held below it (a lease on a
// trimmed record is stale; the next receive starts at the cut); a follower answers
// NOT_LEADER; a trim past the end is refused and changes nothing; TrimToEnd trims to the
// end as the entry applies; a replica killed and restarted comes back with the trimmed start.
func TestTrimOnEveryReplica(t *testing.T) {
	c := newCluster(t, 21, 3)
	l := c.elect()
	if _, err := c.cursorAt(l, createAt(testSub, true)); err != nil {
		t.Fatal(err)
	}
	c.appendN(0, 10) // offsets 0..9, one record a batch
	held, err := c.cursorAt(l, receiveOf(testSub, 2))
	if err != nil || fmt.Sprint(offsets(held)) != "[0 1]" {
		t.Fatalf("receive: %v %v", offsets(held), err)
	}
	r, err := c.trimAt(l, 4)
	if err != nil || r.Err != nil || r.Cut != 4 || r.Start != 4 {
		t.Fatalf("trim to 4: %+v %v", r, err)
	}
	c.converge()
	for id, s := range c.starts() {
		if s != 4 {
			t.Fatalf("n%d's log starts at %d after the trim, want 4", id, s)
		}
	}
	if _, err := c.cursorAt(l, ackOf(testSub, held[0].Receipt)); !errors.Is(err, queue.ErrReceiptStale) {
		t.Fatalf("ack of a trimmed record's lease: %v, want ErrReceiptStale", err)
	}
	next, err := c.cursorAt(l, receiveOf(testSub, 1))
	if err != nil || fmt.Sprint(offsets(next)) != "[4]" {
		t.Fatalf("receive after the trim: %v %v, want [4]", offsets(next), err)
	}
	if cs := c.cursorsAgree(); len(cs) != 1 || cs[0].Floor != 4 {
		t.Fatalf("cursors after the trim: %+v, want one with its floor at 4", cs)
	}

	for _, nd := range c.up() {
		if nd.id == l {
			continue
		}
		_, err := nd.part.Trim(context.Background(), 6)
		var nle *NotLeaderError
		if !errors.As(err, &nle) || nle.Leader != l {
			t.Fatalf("n%d: trim on a follower: %v, want NotLeaderError naming n%d", nd.id, err, l)
		}
	}
	if r, err := c.trimAt(l, 11); err != nil || !errors.Is(r.Err, errTrimPastEnd) || r.Start != 4 {
		t.Fatalf("trim past the end: %+v %v, want the log's refusal and the start still 4", r, err)
	}
	if _, err := c.trimAt(l, -2); !errors.Is(err, ErrBadAppend) {
		t.Fatalf("trim to -2: %v, want ErrBadAppend", err)
	}

	// A follower killed before the next trim applies it from the log when it comes back;
	// the leader killed right after it keeps the start it had answered.
	f := c.up()[0].id
	if f == l {
		f = c.up()[1].id
	}
	c.kill(f)
	c.appendN(10, 2) // 10, 11
	if r, err := c.trimAt(l, TrimToEnd); err != nil || r.Err != nil || r.Cut != 12 || r.Start != 12 {
		t.Fatalf("trim to the end: %+v %v, want 12", r, err)
	}
	c.kill(l)
	c.start(f)
	c.start(l)
	c.converge()
	for id, s := range c.starts() {
		if s != 12 {
			t.Fatalf("n%d's log starts at %d after the restarts, want 12", id, s)
		}
	}
	c.cursorsAgree()
}

// TestTrimEntryRoundTrip: a trim entry decodes to what was encoded, and a malformed one is
// ErrBadEntry.
func TestTrimEntryRoundTrip(t *testing.T) {
	for _, e := range []TrimEntry{{Origin: 1, Request: 2, Offset: 0}, {Origin: 3, Request: 1 << 40, Offset: TrimToEnd}, {Offset: 1 << 50}} {
		got, err := decodeTrim(e.Encode(nil))
		if err != nil || got != e {
			t.Fatalf("round trip of %+v: %+v %v", e, got, err)
		}
	}
	good := (&TrimEntry{Origin: 1, Request: 2, Offset: 5}).Encode(nil)
	for name, b := range map[string][]byte{
		"short":         good[:len(good)-1],
		"trailing":      append(bytes.Clone(good), 0),
		"below the end": (&TrimEntry{Offset: -2}).Encode(nil),
		"version only":  {trimVersion},
	} {
		if _, err := decodeTrim(b); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: %v, want ErrBadEntry", name, err)
		}
	}
}

// FuzzDecodeTrim: any bytes after the version either decode to an entry that encodes back
// to the same bytes, or are ErrBadEntry; nothing panics.
func FuzzDecodeTrim(f *testing.F) {
	f.Add((&TrimEntry{Origin: 1, Request: 2, Offset: 5}).Encode(nil))
	f.Add((&TrimEntry{Origin: 1 << 40, Request: 1 << 62, Offset: TrimToEnd}).Encode(nil))
	f.Add([]byte{trimVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = append([]byte{trimVersion}, b...)
		e, err := decodeTrim(b)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("refusal %v is not ErrBadEntry", err)
			}
			return
		}
		if e.Offset < TrimToEnd {
			t.Fatalf("decoded a trim to %d", e.Offset)
		}
		if again, err := decodeTrim(e.Encode(nil)); err != nil || again != e {
			t.Fatalf("re-encoding %+v decodes to %+v, %v", e, again, err)
		}
	})
}
