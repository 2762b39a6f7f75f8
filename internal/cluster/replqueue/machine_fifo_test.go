package replqueue

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// run applies one command at the machine's next index and returns its result.
func run(tb testing.TB, m *Machine, c Command) Result {
	tb.Helper()
	c.Origin, c.Request = 1, m.Stats().Applied+1
	idx := m.Stats().Applied + 1
	if err := m.Apply([]multiraft.Entry{{Index: idx, Term: 1, Data: c.Encode(nil)}}); err != nil {
		tb.Fatal(err)
	}
	r, _ := m.take(idx, c.Request)
	return r
}

func bodies(ds []Delivery) string {
	var b []byte
	for _, d := range ds {
		b = append(b, d.Body...)
		b = append(b, ' ')
	}
	return string(b)
}

// TestFIFOGroupsAndDedup: one message of a group in flight at a time, in order; a key
// repeated within the window (in the same Put or a later one, and across a snapshot)
// stores nothing and answers the original offset; past the window it is a new message.
func TestFIFOGroupsAndDedup(t *testing.T) {
	m, _ := NewMachine(1, queue.Config{FIFO: true, Visibility: time.Minute})
	r := run(t, m, Command{Op: OpPut, Now: t0, Window: 5 * time.Minute, Msgs: []Msg{
		{Body: []byte("a1"), Group: "a", Key: "k1"}, {Body: []byte("a2"), Group: "a", Key: "k2"},
		{Body: []byte("b1"), Group: "b", Key: "k3"}, {Body: []byte("dup"), Group: "a", Key: "k1"}}})
	if r.Err != nil || len(r.Puts) != 4 || !r.Puts[3].Duplicate || r.Puts[3].Offset != 0 || r.Puts[2].Offset != 2 {
		t.Fatalf("put: %+v", r)
	}
	got := run(t, m, Command{Op: OpReceive, Now: t0, Max: 10, Timeout: time.Minute})
	if bodies(got.Deliveries) != "a1 b1 " || got.Deliveries[0].Group != "a" {
		t.Fatalf("first receive: %q", bodies(got.Deliveries))
	}
	if r := run(t, m, Command{Op: OpReceive, Now: t0, Max: 10, Timeout: time.Minute}); len(r.Deliveries) != 0 {
		t.Fatalf("a group's second message while its first is in flight: %q", bodies(r.Deliveries))
	}
	run(t, m, Command{Op: OpAck, Now: t0, Receipt: got.Deliveries[0].Receipt})
	if r := run(t, m, Command{Op: OpReceive, Now: t0, Max: 10, Timeout: time.Minute}); bodies(r.Deliveries) != "a2 " {
		t.Fatalf("after the ack: %q", bodies(r.Deliveries))
	}

	// A new leader restored from a snapshot still dedups within the window.
	snap, _ := m.Snapshot()
	n, _ := NewMachine(1, queue.Config{FIFO: true, Visibility: time.Minute})
	if err := n.Restore(snap); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(4 * time.Minute)
	if r := run(t, n, Command{Op: OpPut, Now: at, Window: 5 * time.Minute, Msgs: []Msg{{Body: []byte("x"), Group: "a", Key: "k3"}}}); !r.Puts[0].Duplicate || r.Puts[0].Offset != 2 {
		t.Fatalf("retry within the window after a restore: %+v", r)
	}
	at = t0.Add(5*time.Minute + time.Second)
	if r := run(t, n, Command{Op: OpPut, Now: at, Window: 5 * time.Minute, Msgs: []Msg{{Body: []byte("x"), Group: "a", Key: "k3"}}}); r.Puts[0].Duplicate || r.Puts[0].Offset != 3 {
		t.Fatalf("past the window: %+v", r)
	}
	// The window's clock is the entry's: a replica's own clock never enters apply, and a
	// stamp behind the queue's time is clamped (the dedup does not come back).
	if r := run(t, n, Command{Op: OpPut, Now: t0, Window: 5 * time.Minute, Msgs: []Msg{{Body: []byte("y"), Group: "a", Key: "k1"}}}); r.Puts[0].Duplicate {
		t.Fatalf("a stamp from the past revived an expired key: %+v", r)
	}
}

// TestDeadLetters: a limited receive moves a message received maxReceives times to the
// dead letters (its group's next message goes on), and they stay there, through a
// snapshot, until DeadDone.
func TestDeadLetters(t *testing.T) {
	m, _ := NewMachine(1, queue.Config{FIFO: true, Visibility: time.Second})
	run(t, m, Command{Op: OpPut, Now: t0, Window: time.Minute, Msgs: []Msg{
		{Body: []byte("p"), Group: "g", DedupID: "d1"}, {Body: []byte("q"), Group: "g"}}})
	at := t0
	for i := 1; i <= 2; i++ {
		r := run(t, m, Command{Op: OpReceiveLimited, Now: at, Max: 1, Timeout: time.Second, MaxReceives: 2})
		if bodies(r.Deliveries) != "p " || r.Deliveries[0].ReceiveCount != i || r.Dead != 0 {
			t.Fatalf("receive %d: %+v", i, r)
		}
		at = at.Add(2 * time.Second)
	}
	r := run(t, m, Command{Op: OpReceiveLimited, Now: at, Max: 1, Timeout: time.Second, MaxReceives: 2})
	if bodies(r.Deliveries) != "q " || r.Dead != 1 {
		t.Fatalf("third receive: %q dead %d, want q and p dead-lettered", bodies(r.Deliveries), r.Dead)
	}
	snap, _ := m.Snapshot()
	n, _ := NewMachine(1, queue.Config{FIFO: true, Visibility: time.Second})
	if err := n.Restore(snap); err != nil {
		t.Fatal(err)
	}
	dl := n.DeadLetters(10)
	if len(dl) != 1 || string(dl[0].Body) != "p" || dl[0].ReceiveCount != 2 || dl[0].Group != "g" || dl[0].Dedup != "d1" || n.Depth().Dead != 1 {
		t.Fatalf("dead letters after a restore: %+v", dl)
	}
	run(t, n, Command{Op: OpDeadDone, Now: at, Offsets: []int64{dl[0].Offset}})
	if len(n.DeadLetters(10)) != 0 {
		t.Fatal("DeadDone left the dead letter")
	}
}

// TestPurge: everything sent before the purge is gone, in flight included; later sends
// are not.
func TestPurge(t *testing.T) {
	m, _ := NewMachine(1, queue.Config{Visibility: time.Minute, Lookahead: 2})
	for i := range 5 {
		run(t, m, Command{Op: OpSend, Now: t0, Body: []byte(fmt.Sprint(i))})
	}
	got := run(t, m, Command{Op: OpReceive, Now: t0, Max: 1})
	run(t, m, Command{Op: OpPurge, Now: t0})
	if r := run(t, m, Command{Op: OpAck, Now: t0, Receipt: got.Deliveries[0].Receipt}); r.Err == nil {
		t.Fatal("a purged delivery's receipt was still good")
	}
	run(t, m, Command{Op: OpSend, Now: t0, Body: []byte("after")})
	if r := run(t, m, Command{Op: OpReceive, Now: t0, Max: 10}); bodies(r.Deliveries) != "after " {
		t.Fatalf("after the purge: %q", bodies(r.Deliveries))
	}
	if st := m.Stats(); st.Stored != 1 {
		t.Fatalf("bodies kept after the purge: %+v", st)
	}
}

// TestFIFORandomized drives a FIFO machine with random Puts (groups, repeated keys),
// limited receives, acks, nacks, purges and DeadDones, and a second machine restored from
// the first's snapshot now and then; it checks against a model that a group's message is
// delivered only once every earlier one of its group is finished, that a key dedups
// exactly within its window of the entry's clock, that every message ends in exactly one
// place, and that both machines agree.
func TestFIFORandomized(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { fifoRandom(t, seed) })
	}
}

type fifoModel struct {
	group    map[int64]string
	finished map[int64]string // offset -> how: acked, dead, purged
	keys     map[string][2]int64
	now      int64
}

func fifoRandom(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	cfg := queue.Config{FIFO: true, Visibility: 3 * time.Second, Lookahead: 4, Retention: time.Hour}
	a, _ := NewMachine(1, cfg)
	b, _ := NewMachine(1, cfg)
	const window = 20 * time.Second
	md := fifoModel{group: map[int64]string{}, finished: map[int64]string{}, keys: map[string][2]int64{}}
	now := t0
	var receipts []Delivery
	for i := range 500 {
		now = now.Add(time.Duration(rng.Intn(2500)-300) * time.Millisecond)
		md.now = max(md.now, now.UnixNano())
		c := Command{Origin: 1, Request: uint64(i + 1), Now: now}
		switch k := rng.Intn(20); {
		case k < 6:
			c.Op, c.Window = OpPut, window
			for range 1 + rng.Intn(3) {
				c.Msgs = append(c.Msgs, Msg{Body: []byte(fmt.Sprint("m", i)), Group: string(rune('a' + rng.Intn(3))),
					Key: fmt.Sprint("k", rng.Intn(40))})
			}
		case k < 11:
			c.Op, c.Max, c.MaxReceives = OpReceiveLimited, 1+rng.Intn(3), 1+rng.Intn(3)
		case k < 12:
			c.Op = OpPurge
		case k < 14:
			if dl := a.DeadLetters(3); len(dl) > 0 {
				c.Op = OpDeadDone
				for _, d := range dl {
					c.Offsets = append(c.Offsets, d.Offset)
				}
				break
			}
			fallthrough
		case len(receipts) == 0:
			c.Op, c.Max = OpReceive, 1
		default:
			d := receipts[rng.Intn(len(receipts))]
			c.Op, c.Receipt, c.Delay = []Op{OpAck, OpAck, OpNack}[rng.Intn(3)], d.Receipt, time.Second
		}
		idx := uint64(i + 1)
		e := []multiraft.Entry{{Index: idx, Term: 1, Data: c.Encode(nil)}}
		deadBefore := a.Stats().Dead
		if err := a.Apply(e); err != nil {
			t.Fatal(err)
		}
		ra, _ := a.take(idx, c.Request)
		md.check(t, a, &c, ra, receipts, deadBefore)
		receipts = append(receipts, ra.Deliveries...)
		if rng.Intn(30) == 0 {
			snap, _ := a.Snapshot()
			if err := b.Restore(snap); err != nil {
				t.Fatal(err)
			}
		} else if err := b.Apply(e); err != nil {
			t.Fatal(err)
		}
		sa, _ := a.Snapshot()
		sb, _ := b.Snapshot()
		if !bytes.Equal(sa, sb) {
			t.Fatalf("entry %d (%v): snapshots differ", idx, c.Op)
		}
	}
	st := a.Stats()
	// Every message is in exactly one place: unfinished in the cursor, acked, purged, or a
	// dead letter (pending its copy, or copied).
	if unfinished := int(st.Next) - len(md.finished); st.Stored != unfinished {
		t.Fatalf("stored %d, but %d of %d messages are unfinished in the model", st.Stored, unfinished, st.Next)
	}
	for _, dl := range a.DeadLetters(1 << 20) {
		if md.finished[dl.Offset] != "dead" {
			t.Fatalf("dead letter %d is %q in the model", dl.Offset, md.finished[dl.Offset])
		}
	}
}

func (md *fifoModel) check(t *testing.T, m *Machine, c *Command, r Result, receipts []Delivery, deadBefore int) {
	t.Helper()
	switch c.Op {
	case OpPut:
		for i, p := range r.Puts {
			msg := c.Msgs[i]
			k, seen := md.keys[msg.Key]
			live := seen && md.now < k[1]
			if p.Duplicate != live || (live && p.Offset != k[0]) {
				t.Fatalf("put key %s at %d: %+v, model %v %v", msg.Key, md.now, p, k, live)
			}
			if !p.Duplicate {
				md.keys[msg.Key] = [2]int64{p.Offset, md.now + int64(c.Window)}
				md.group[p.Offset] = msg.Group
			}
		}
	case OpReceive, OpReceiveLimited:
		// Dead-lettered by this receive: finished before what it delivered.
		for _, dl := range m.DeadLetters(1 << 20) {
			if md.finished[dl.Offset] == "" {
				md.finished[dl.Offset] = "dead"
			}
		}
		for _, d := range r.Deliveries {
			if md.finished[d.Offset] != "" {
				t.Fatalf("offset %d delivered after it was %s", d.Offset, md.finished[d.Offset])
			}
			for off, g := range md.group {
				if off < d.Offset && g == d.Group && md.finished[off] == "" {
					t.Fatalf("offset %d of group %s delivered before offset %d finished", d.Offset, g, off)
				}
			}
		}
		if got := m.Stats().Dead - deadBefore; got != r.Dead {
			t.Fatalf("receive reported %d dead letters, %d added", r.Dead, got)
		}
	case OpAck:
		if r.Err == nil {
			for _, d := range receipts {
				if d.Receipt == c.Receipt {
					if md.finished[d.Offset] != "" {
						t.Fatalf("ack of offset %d after it was %s", d.Offset, md.finished[d.Offset])
					}
					md.finished[d.Offset] = "acked"
				}
			}
		}
	case OpPurge:
		for off := range md.group {
			if md.finished[off] == "" {
				md.finished[off] = "purged"
			}
		}
	}
}
