package replqueue

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// results applies cmds as consecutive entries from the machine's next index and returns
// their results.
func results(t *testing.T, m *Machine, cmds ...Command) []Result {
	t.Helper()
	var out []Result
	for _, c := range cmds {
		idx := m.Stats().Applied + 1
		c.Origin, c.Request = 1, idx
		if err := m.Apply([]multiraft.Entry{{Index: idx, Term: 1, Data: c.Encode(nil)}}); err != nil {
			t.Fatal(err)
		}
		r, _ := m.take(idx, c.Request)
		out = append(out, r)
	}
	return out
}

// TestPeek: a peek shows every unfinished message in offset order with where it stands —
// visible, in flight (with its receive count and when it comes back), delayed — leaves
// out the acked ones, pages with its next offset, and changes nothing.
func TestPeek(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	m, _ := NewMachine(1, queue.Config{Visibility: 30 * time.Second, Lookahead: 16, Retention: time.Hour})
	var cmds []Command
	for i := range 4 {
		cmds = append(cmds, Command{Op: OpSend, Body: []byte(fmt.Sprint("m", i)), Now: now})
	}
	cmds = append(cmds, Command{Op: OpSend, Body: []byte("later"), Delay: time.Minute, Now: now})
	results(t, m, cmds...)
	ds := results(t, m, Command{Op: OpReceive, Max: 2, Timeout: 30 * time.Second, Now: now})[0].Deliveries
	if len(ds) != 2 {
		t.Fatalf("received %d", len(ds))
	}
	results(t, m, Command{Op: OpAck, Receipt: ds[0].Receipt, Now: now})
	before := fmt.Sprint(m.Stats(), m.Depth())

	show := func(ps []Peeked) string {
		var b []string
		for _, p := range ps {
			s := fmt.Sprintf("%d:%s:%s:%d", p.Offset, p.Body, p.State, p.ReceiveCount)
			if !p.VisibleAt.IsZero() {
				s += ":+" + p.VisibleAt.Sub(now).String()
			}
			b = append(b, s)
		}
		return strings.Join(b, " ")
	}
	all, next := m.Peek(now, 0, 10)
	if got, want := show(all), "1:m1:in_flight:1:+30s 2:m2:visible:0 3:m3:visible:0 4:later:delayed:0:+1m0s"; got != want || next != 5 {
		t.Errorf("peek: %s next %d\nwant  %s next 5", got, next, want)
	}
	page, next := m.Peek(now, 0, 2)
	if got := show(page); got != "1:m1:in_flight:1:+30s 2:m2:visible:0" || next != 3 {
		t.Errorf("first page: %s next %d", got, next)
	}
	page, next = m.Peek(now, next, 2)
	if got := show(page); got != "3:m3:visible:0 4:later:delayed:0:+1m0s" || next != 5 {
		t.Errorf("second page: %s next %d", got, next)
	}
	// Past the lease, the in-flight message is visible again at the time asked.
	if late, _ := m.Peek(now.Add(31*time.Second), 0, 1); show(late) != "1:m1:visible:1" {
		t.Errorf("after the lease: %s", show(late))
	}
	if after := fmt.Sprint(m.Stats(), m.Depth()); after != before {
		t.Errorf("a peek changed the machine:\n%s\n%s", before, after)
	}
}

// TestPeekCountsWhatDepthCounts: through random sends, receives, acks, nacks and extends,
// a peek of everything shows as many messages as the machine's depth counts, visible, in
// flight and delayed alike.
func TestPeekCountsWhatDepthCounts(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	m, _ := NewMachine(1, queue.Config{Visibility: 5 * time.Second, Lookahead: 4, Retention: time.Hour})
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var receipts []string
	for i := range 500 {
		now = now.Add(time.Duration(rng.Intn(2000)) * time.Millisecond)
		c := Command{Now: now}
		switch k := rng.Intn(10); {
		case k < 4:
			c.Op, c.Body, c.Delay = OpSend, []byte(fmt.Sprint("m", i)), time.Duration(rng.Intn(3))*time.Second
		case k < 6 || len(receipts) == 0:
			c.Op, c.Max = OpReceive, 1+rng.Intn(3)
		default:
			c.Op = []Op{OpAck, OpAck, OpNack, OpExtend}[rng.Intn(4)]
			c.Receipt = receipts[rng.Intn(len(receipts))]
			c.Timeout, c.Delay = time.Second, time.Second
		}
		for _, d := range results(t, m, c)[0].Deliveries {
			receipts = append(receipts, d.Receipt)
		}
		d := m.Depth()
		ps, _ := m.Peek(m.Now(), 0, 1<<20)
		if want := d.Visible + d.InFlight + d.Delayed; int64(len(ps)) != want {
			t.Fatalf("step %d: peek shows %d messages, depth counts %d (%+v)", i, len(ps), want, d)
		}
	}
}
