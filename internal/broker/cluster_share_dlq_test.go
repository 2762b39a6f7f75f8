package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestClusterShareDeadLetters: a share group with sluice.share.dead.letter.queue on a
// three-node cluster (it was refused there). A rejected record, one released at the
// delivery count limit and one whose lock ran out at the limit are each copied to the
// queue (body, source, receive count, topic and offset kept) and never delivered again;
// an accepted one is not copied; the replicas' cursors agree and keep no dead letter once
// the copies are in. The brokers run on an injected clock.
func TestClusterShareDeadLetters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const lock = time.Second
	was := balanceEvery
	balanceEvery = time.Hour // the leader found below stays the leader
	t.Cleanup(func() { balanceEvery = was })
	clock := newClock()
	c := newMemClusterClock(t, 3, 0, clock.Now)
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateQueue(QueueSettings{Name: "dlq"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.setShareConfig(c.ids[1], "g", ShareAutoOffsetResetKey, "earliest", ShareLockDurationKey, fmt.Sprint(lock.Milliseconds()),
		ShareDeliveryLimitKey, "2", ShareDeadLetterKey, "dlq")
	member := c.shareMemberHolding4(t)
	ack, fetch := member.ack, member.fetch
	ack(0, ShareAckReject, ShareAckRelease, ShareAckAccept) // 0 rejected, 1 back at count 2, 2 done; 3 held
	if got := fetch(0); len(got) != 1 || got[1] != 2 {
		t.Fatalf("after reject, release, accept: %v, want 1 again at count 2", got)
	}
	ack(1, ShareAckRelease) // at the limit: archived, to the queue
	clock.Advance(lock + time.Millisecond)
	if got := fetchSeen(t, fetch, 1); len(got) != 1 || got[3] != 2 {
		t.Fatalf("after offset 3's lock ran out: %v, want 3 at count 2", got)
	}
	clock.Advance(lock + time.Millisecond) // its lock runs out at the limit: archived on the next acquisition
	if got := fetch(300 * time.Millisecond); len(got) > 0 {
		t.Fatalf("after the lock ran out at the limit: %v delivered", got)
	}

	copies := c.deadLetters(t, "dlq", 3)
	var offs []string
	for _, d := range copies {
		m := d.Message
		off := m.System["sluice.offset"]
		offs = append(offs, off)
		// Receives before the copy; offset 3's include the acquisition that found it past
		// the limit, as on a single node.
		want := map[string]int{"0": 1, "1": 2, "3": 3}[off]
		if m.DeadLetter == nil || m.DeadLetter.SourceQueue != "t/g" || m.DeadLetter.ReceiveCount != want ||
			m.System["sluice.topic"] != "t" || string(m.Body) != "r-"+off {
			t.Fatalf("copy of offset %s: %+v (dead letter %+v, system %v), want receive count %d", off, m, m.DeadLetter, m.System, want)
		}
	}
	if slices.Sort(offs); fmt.Sprint(offs) != "[0 1 3]" {
		t.Fatalf("copies of offsets %v, want 0, 1 and 3", offs)
	}
	clock.Advance(3 * lock)
	if got := fetch(300 * time.Millisecond); len(got) > 0 {
		t.Fatalf("after every record was finished: %v", got)
	}
	c.cursorsAgree(t, "t", 1)
	id := subIDOf(t, c, "t", "g")
	for _, nid := range c.ids {
		for deadline := time.Now().Add(10 * time.Second); c.mustPart(c.nodes[nid].b, "t", 0).repl.Load().sm.DeadCount(id) > 0; {
			if time.Now().After(deadline) {
				t.Fatalf("n%d still keeps dead letters whose copies are in", nid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if extra := c.receiveQueue(t, "dlq", 10); len(extra) != 0 {
		t.Fatalf("%d more copies in the queue", len(extra))
	}
}
