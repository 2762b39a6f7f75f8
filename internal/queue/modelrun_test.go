package queue

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

// harness plays the broker around a cursor: it owns the log, the journal, a snapshot, and the
// receipts consumers hold, and checks every answer against the model.
type harness struct {
	t       testing.TB
	rng     *rand.Rand
	cfg     Config
	c       *Cursor
	m       *model
	log     testLog
	now     time.Time
	journal [][]byte // encoded, as the broker would write it
	snap    []byte
	snapAt  int // journal length when snap was taken
	// dlqLast journals a receive's DeadLettered events after its other events, as the broker
	// does (it copies to the DLQ first): replay must not depend on that order.
	dlqLast  bool
	receipts []Receipt
	stats    map[string]int
}

func newHarness(t testing.TB, seed int64) *harness {
	rng := rand.New(rand.NewSource(seed))
	cfg := randomConfig(rng)
	h := &harness{t: t, rng: rng, cfg: cfg, c: mustNew(t, cfg), now: t0, stats: map[string]int{}, dlqLast: seed%2 == 1}
	h.m = &model{cfg: cfg.withDefaults()}
	h.snap, h.snapAt = h.c.Snapshot(), 0
	return h
}

func (h *harness) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("cfg %+v: %s", h.cfg, fmt.Sprintf(format, args...))
}

func (h *harness) record(evs []Event) {
	for _, ev := range evs {
		b, err := ev.MarshalBinary()
		if err != nil {
			h.fail("encode %#v: %v", ev, err)
		}
		h.journal = append(h.journal, b)
	}
	// Snapshot now and then, as the broker does to keep start time short.
	if len(h.journal)-h.snapAt > 256 && h.rng.Intn(8) == 0 {
		h.snap, h.snapAt = h.c.Snapshot(), len(h.journal)
	}
}

// step performs one random operation and checks the cursor against the model.
func (h *harness) step() {
	switch p := h.rng.Intn(1000); {
	case p < 200:
		h.send()
	case p < 440:
		h.receive()
	case p < 640:
		h.ack()
	case p < 720:
		h.nack()
	case p < 800:
		h.extend()
	case p < 940:
		h.now = h.now.Add(time.Duration(h.rng.Intn(20000)) * time.Millisecond)
	case p < 948:
		h.crash()
	case p < 975:
		h.log.gap(1 + h.rng.Intn(3))
	case p < 980:
		h.snap, h.snapAt = h.c.Snapshot(), len(h.journal)
	case p < 982:
		h.purge()
	default:
		h.malformed()
	}
	h.check()
}

func (h *harness) send() {
	group := ""
	if h.cfg.FIFO || h.rng.Intn(2) == 0 {
		group = string(rune('a' + h.rng.Intn(4)))
	}
	var delay time.Duration
	if h.rng.Intn(5) == 0 {
		delay = time.Duration(h.rng.Intn(60)) * time.Second
	}
	off := h.log.send(h.now, group, delay)
	h.m.send(h.log.metas[len(h.log.metas)-1])
	_ = off
}

func (h *harness) receive() {
	h.record(fill(h.c, &h.log, h.now))
	max := 1 + h.rng.Intn(maxBatch)
	var vis time.Duration
	if h.rng.Intn(4) == 0 {
		vis = time.Duration(1+h.rng.Intn(40)) * time.Second
	}
	got, evs, err := h.c.Receive(h.now, max, vis)
	if err != nil {
		h.fail("receive: %v", err)
	}
	if h.dlqLast {
		var rest, dead []Event
		for _, ev := range evs {
			if _, ok := ev.(DeadLettered); ok {
				dead = append(dead, ev)
			} else {
				rest = append(rest, ev)
			}
		}
		evs = append(rest, dead...)
	}
	h.record(evs)
	want, wantDead := h.m.receive(h.now, max, vis)
	var gotDead []DeadLettered
	for _, ev := range evs {
		if d, ok := ev.(DeadLettered); ok {
			gotDead = append(gotDead, d)
		}
	}
	for i := range got {
		r, err := ParseReceipt(got[i].Receipt)
		if err != nil || r.Offset != got[i].Offset || r.Token != got[i].FencingToken {
			h.fail("receipt %q of %+v: %v", got[i].Receipt, got[i], err)
		}
		h.receipts = append(h.receipts, r)
		got[i].Receipt = ""
	}
	if !reflect.DeepEqual(normTimes(got), normTimes(want)) || !reflect.DeepEqual(gotDead, wantDead) {
		h.fail("at %v receive(%d, %v):\n got  %+v dead %+v\n want %+v dead %+v", h.now.Sub(t0), max, vis, got, gotDead, want, wantDead)
	}
	h.stats["delivered"] += len(got)
	h.stats["deadLettered"] += len(gotDead)
}

// normTimes makes times comparable with DeepEqual (location and monotonic reading differ).
func normTimes(ds []Delivery) []Delivery {
	for i := range ds {
		ds[i].FirstReceivedAt = ds[i].FirstReceivedAt.UTC()
		ds[i].Deadline = ds[i].Deadline.UTC()
		ds[i].SentAt = ds[i].SentAt.UTC()
	}
	return ds
}

// pick returns a receipt consumers hold: mostly a recent one, sometimes any older one, which
// is then usually stale.
func (h *harness) pick() (Receipt, bool) {
	n := len(h.receipts)
	if n == 0 {
		return Receipt{}, false
	}
	if h.rng.Intn(4) == 0 {
		return h.receipts[h.rng.Intn(n)], true
	}
	return h.receipts[n-1-h.rng.Intn(min(n, 8))], true
}

func (h *harness) compare(op string, got, want error) {
	if errClass(got) != errClass(want) {
		h.fail("at %v %s: cursor says %v, model says %v", h.now.Sub(t0), op, got, want)
	}
	if want == nil {
		h.stats[op]++
	} else {
		h.stats[op+" refused"]++
	}
}

func (h *harness) ack() {
	r, ok := h.pick()
	if !ok {
		return
	}
	evs, err := h.c.Ack(h.now, r.String())
	h.record(evs)
	h.compare("ack", err, h.m.ack(r))
}

func (h *harness) nack() {
	r, ok := h.pick()
	if !ok {
		return
	}
	delay := time.Duration(h.rng.Intn(3)*h.rng.Intn(30)) * time.Second
	reason := fmt.Sprintf("reason %d", h.rng.Intn(100))
	evs, err := h.c.Nack(h.now, r.String(), delay, reason)
	h.record(evs)
	h.compare("nack", err, h.m.nack(h.now, r, delay, reason))
}

func (h *harness) extend() {
	r, ok := h.pick()
	if !ok {
		return
	}
	d := time.Duration(h.rng.Intn(120)) * time.Second
	evs, err := h.c.Extend(h.now, r.String(), d)
	h.record(evs)
	h.compare("extend", err, h.m.extend(h.now, r, d))
}

func (h *harness) purge() {
	h.record(h.c.Purge(h.now, h.log.end))
	h.m.purge()
	h.stats["purge"]++
}

func (h *harness) malformed() {
	r, ok := h.pick()
	if !ok {
		return
	}
	s := []byte(r.String())
	s[h.rng.Intn(len(s))] ^= byte(1 + h.rng.Intn(255))
	if _, err := h.c.Ack(h.now, string(s)); err == nil {
		h.fail("corrupted receipt %q accepted", s)
	}
	h.stats["malformed"]++
}

// crash drops the cursor and rebuilds it, from the whole journal or from the last snapshot
// plus the tail; its durable state must be byte-identical to the lost cursor's.
func (h *harness) crash() {
	want := h.c.Snapshot()
	var c *Cursor
	if h.rng.Intn(4) == 0 {
		c = mustNew(h.t, h.cfg)
		replay(h, c, h.journal)
		h.stats["crash full"]++
	} else {
		var err error
		if c, err = Restore(h.cfg, h.snap); err != nil {
			h.fail("restore: %v", err)
		}
		replay(h, c, h.journal[h.snapAt:])
		h.stats["crash snapshot"]++
	}
	if got := c.Snapshot(); !bytes.Equal(got, want) {
		h.fail("rebuilt state differs:\n got  %x\n want %x", got, want)
	}
	h.c = c
	h.record(fill(h.c, &h.log, h.now))
}

// check compares what both sides can see after every step.
func (h *harness) check() {
	s := h.c.Stats(h.now)
	if want := h.m.inFlight(h.now); s.InFlight != want {
		h.fail("at %v in flight %d, model %d", h.now.Sub(t0), s.InFlight, want)
	}
	if s.DeadLettered != uint64(len(h.m.dead)) || s.Receives != h.m.token {
		h.fail("stats %+v, model dead %d receives %d", s, len(h.m.dead), h.m.token)
	}
	if err := h.c.Fault(); err != nil {
		h.fail("cursor caught a bug in itself: %v", err)
	}
	if want := min(h.m.lowestOpen(h.log.end), h.c.ReadPos()); h.c.Floor() != want {
		h.fail("floor %d, want %d (read pos %d)", h.c.Floor(), want, h.c.ReadPos())
	}
	if s.Held > len(h.m.msgs) {
		h.fail("cursor holds %d messages, model has %d unfinished", s.Held, len(h.m.msgs))
	}
}

func replay(h *harness, c *Cursor, journal [][]byte) {
	for _, b := range journal {
		ev, err := UnmarshalEvent(b)
		if err != nil {
			h.fail("decode %x: %v", b, err)
		}
		if err := c.Apply(ev); err != nil {
			h.fail("apply %#v: %v", ev, err)
		}
	}
}
