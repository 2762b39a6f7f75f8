package queue

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fixture is a cursor over a test log with a journal, for the table tests.
type fixture struct {
	t       *testing.T
	c       *Cursor
	log     testLog
	journal []Event
}

func newFixture(t *testing.T, cfg Config) *fixture {
	return &fixture{t: t, c: mustNew(t, cfg)}
}

func (f *fixture) send(n int, group string) {
	for range n {
		f.log.send(t0, group, 0)
	}
}

func (f *fixture) receive(sec, max int) []Delivery {
	f.t.Helper()
	f.journal = append(f.journal, fill(f.c, &f.log, at(sec))...)
	ds, evs, err := f.c.Receive(at(sec), max, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	f.journal = append(f.journal, evs...)
	return ds
}

func (f *fixture) do(evs []Event, err error) error {
	f.journal = append(f.journal, evs...)
	return err
}

func offsets(ds []Delivery) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.Offset)
	}
	return out
}

func eqOffsets(t *testing.T, what string, ds []Delivery, want ...int64) {
	t.Helper()
	got := offsets(ds)
	if len(got) != len(want) {
		t.Fatalf("%s: delivered %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: delivered %v, want %v", what, got, want)
		}
	}
}

func TestReceipts(t *testing.T) {
	tests := []struct {
		name string
		run  func(f *fixture) error
		want error
	}{
		{"current receipt acks", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			return f.do(f.c.Ack(at(1), d.Receipt))
		}, nil},
		{"second ack is stale", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			f.do(f.c.Ack(at(1), d.Receipt))
			return f.do(f.c.Ack(at(2), d.Receipt))
		}, ErrReceiptStale},
		{"expired, not redelivered: ack still works", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			return f.do(f.c.Ack(at(45), d.Receipt))
		}, nil},
		{"expired, not redelivered: extend refused", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			return f.do(f.c.Extend(at(30), d.Receipt, time.Minute))
		}, ErrNotInFlight},
		{"nacked: extend refused", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			f.do(f.c.Nack(at(1), d.Receipt, 0, "busy"))
			return f.do(f.c.Extend(at(2), d.Receipt, time.Minute))
		}, ErrNotInFlight},
		{"redelivered: old receipt stale for ack", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			if again := f.receive(30, 1); len(again) != 1 || again[0].FencingToken <= d.FencingToken {
				f.t.Fatalf("redelivery %+v after %+v", again, d)
			}
			return f.do(f.c.Ack(at(31), d.Receipt))
		}, ErrReceiptStale},
		{"redelivered: old receipt stale for nack and extend", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			f.receive(30, 1)
			if err := f.do(f.c.Extend(at(31), d.Receipt, time.Second)); !errors.Is(err, ErrReceiptStale) {
				return err
			}
			return f.do(f.c.Nack(at(31), d.Receipt, 0, ""))
		}, ErrReceiptStale},
		{"receipt of an unknown offset", func(f *fixture) error {
			return f.do(f.c.Ack(at(0), Receipt{Offset: 99, Token: 1}.String()))
		}, ErrReceiptStale},
		{"empty", func(f *fixture) error { return f.do(f.c.Ack(at(0), "")) }, ErrReceiptInvalid},
		{"garbage", func(f *fixture) error { return f.do(f.c.Ack(at(0), "not-a-receipt-at-all-12345")) }, ErrReceiptInvalid},
		{"one character changed", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			b := []byte(d.Receipt)
			b[5] ^= 0x01
			return f.do(f.c.Ack(at(1), string(b)))
		}, ErrReceiptInvalid},
		{"truncated", func(f *fixture) error {
			d := f.receive(0, 1)[0]
			return f.do(f.c.Ack(at(1), d.Receipt[:len(d.Receipt)-1]))
		}, ErrReceiptInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{Visibility: 30 * time.Second})
			f.send(2, "")
			before := f.c.Snapshot()
			n := len(f.journal)
			err := tt.run(f)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err != nil && len(f.journal) == n && string(before) != string(f.c.Snapshot()) {
				t.Fatal("a refused call changed the state")
			}
		})
	}
}

// TestRefusedCallChangesNothing checks the rule for every refusal in one place: same state,
// no events.
func TestRefusedCallChangesNothing(t *testing.T) {
	f := newFixture(t, Config{Visibility: 30 * time.Second, MaxExtension: time.Minute})
	f.send(3, "")
	ds := f.receive(0, 2)
	f.receive(30, 1) // ds[0] redelivered: its first receipt is stale
	before := f.c.Snapshot()
	calls := map[string]func() ([]Event, error){
		"stale ack":     func() ([]Event, error) { return f.c.Ack(at(31), ds[0].Receipt) },
		"bad receipt":   func() ([]Event, error) { return f.c.Nack(at(31), "x", 0, "") },
		"too long":      func() ([]Event, error) { return f.c.Extend(at(31), ds[1].Receipt, 2*time.Minute) },
		"negative nack": func() ([]Event, error) { return f.c.Nack(at(31), ds[1].Receipt, -time.Second, "") },
	}
	for name, call := range calls {
		if evs, err := call(); err == nil || len(evs) != 0 {
			t.Errorf("%s: err %v events %v", name, err, evs)
		}
		if string(f.c.Snapshot()) != string(before) {
			t.Errorf("%s changed the state", name)
		}
	}
	if _, _, err := f.c.Receive(at(31), 1, 13*time.Hour); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("visibility beyond MaxExtension: %v", err)
	}
}

func TestExtensionBound(t *testing.T) {
	f := newFixture(t, Config{Visibility: 30 * time.Second, MaxExtension: time.Minute})
	f.send(1, "")
	d := f.receive(0, 1)[0]
	if err := f.do(f.c.Extend(at(10), d.Receipt, 50*time.Second)); err != nil {
		t.Fatalf("extend to exactly the limit: %v", err)
	}
	err := f.do(f.c.Extend(at(20), d.Receipt, 41*time.Second))
	var lim *ExtensionLimitError
	if !errors.As(err, &lim) || lim.Requested != 61*time.Second || lim.Max != time.Minute || lim.Offset != 0 {
		t.Fatalf("beyond the limit: %v", err)
	}
	if ds := f.receive(59, 1); len(ds) != 0 {
		t.Fatalf("refused extension changed the deadline: %+v", ds)
	}
	if ds := f.receive(60, 1); len(ds) != 1 || ds[0].ReceiveCount != 2 {
		t.Fatalf("redelivery at the extended deadline: %+v", ds)
	}
	// Each delivery has its own budget, counted from its receive.
	d = f.receive(90, 1)[0]
	if err := f.do(f.c.Extend(at(100), d.Receipt, 50*time.Second)); err != nil {
		t.Fatalf("new delivery, new budget: %v", err)
	}
}

// TestHeartbeatsRepeat: a slow consumer that keeps extending keeps the message.
func TestHeartbeatsRepeat(t *testing.T) {
	f := newFixture(t, Config{Visibility: 30 * time.Second})
	f.send(1, "")
	d := f.receive(0, 1)[0]
	for sec := 20; sec < 3600; sec += 20 {
		if err := f.do(f.c.Extend(at(sec), d.Receipt, 30*time.Second)); err != nil {
			t.Fatalf("t=%d: %v", sec, err)
		}
		if ds := f.receive(sec+1, 1); len(ds) != 0 {
			t.Fatalf("t=%d: delivered while extended: %+v", sec, ds)
		}
	}
	if err := f.do(f.c.Ack(at(3600), d.Receipt)); err != nil {
		t.Fatal(err)
	}
}

func TestFIFOOrderThroughFailure(t *testing.T) {
	f := newFixture(t, Config{FIFO: true, Visibility: 30 * time.Second, MaxReceives: 2})
	f.send(3, "a") // 0, 1, 2
	f.send(1, "b") // 3
	first := f.receive(0, 10)
	eqOffsets(t, "one per group", first, 0, 3)
	f.do(f.c.Ack(at(0), first[1].Receipt))
	if err := f.do(f.c.Nack(at(1), first[0].Receipt, time.Minute, "downstream 503")); err != nil {
		t.Fatal(err)
	}
	eqOffsets(t, "a nack delay blocks the group", f.receive(30, 10))
	a := f.receive(61, 10)
	eqOffsets(t, "the nacked head comes back first", a, 0)
	if a[0].ReceiveCount != 2 {
		t.Fatalf("receive count %d", a[0].ReceiveCount)
	}
	eqOffsets(t, "in flight blocks the group", f.receive(70, 10))
	// a0 fails again (its visibility runs out) and has used its two receives: it is
	// dead-lettered and a1 goes in the same receive, since the group moves on.
	ds, evs, err := f.c.Receive(at(91), 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	eqOffsets(t, "group moves on past a dead letter", ds, 1)
	dl, ok := evs[0].(DeadLettered)
	if !ok || dl.Offset != 0 || dl.Count != 2 || dl.Reason != "downstream 503" || !dl.FirstAt.Equal(at(0)) ||
		!dl.LastAt.Equal(at(61)) || dl.GroupID != "a" {
		t.Fatalf("dead letter record %+v", evs[0])
	}
	if err := f.do(f.c.Ack(at(92), ds[0].Receipt)); err != nil {
		t.Fatal(err)
	}
	eqOffsets(t, "ack releases the next", f.receive(93, 10), 2)
}

// TestHeadOfLineLimit: in a FIFO queue, blocked messages fill the lookahead window; while it
// is all blocked, messages of other groups further on in the log wait unread.
func TestHeadOfLineLimit(t *testing.T) {
	f := newFixture(t, Config{FIFO: true, Lookahead: 4})
	f.send(5, "a") // 0..4
	f.send(1, "b") // 5
	ds := f.receive(0, 10)
	eqOffsets(t, "only a's head", ds, 0)
	eqOffsets(t, "window blocked", f.receive(1, 10))
	if f.c.Wants() != 0 || f.c.ReadPos() != 5 || f.c.Stats(at(1)).Blocked != 4 {
		t.Fatalf("window: wants %d read pos %d stats %+v", f.c.Wants(), f.c.ReadPos(), f.c.Stats(at(1)))
	}
	f.do(f.c.Ack(at(2), ds[0].Receipt))
	eqOffsets(t, "next head of a", f.receive(3, 10), 1)
	eqOffsets(t, "a slot is free: b is read", f.receive(4, 10), 5)
}

func TestRetention(t *testing.T) {
	cfg := Config{Visibility: 30 * time.Second, Retention: time.Hour, MaxExtension: time.Hour}
	f := newFixture(t, cfg)
	f.log.send(at(-7200), "", 0)                      // 0: already too old when read
	f.log.send(at(0), "", 0)                          // 1: delivered, then ages out while in flight
	f.log.send(at(0), "", 50*time.Minute+time.Second) // 2: delayed 50 min, delivered within retention
	f.log.send(at(0), "", 2*time.Hour)                // 3: delayed beyond retention
	ds := f.receive(0, 10)
	eqOffsets(t, "old message dropped on read", ds, 1)
	if s := f.c.Stats(at(0)); s.Expired != 1 || f.c.Floor() != 1 {
		t.Fatalf("stats %+v floor %d", s, f.c.Floor())
	}
	f.do(f.c.Extend(at(1), ds[0].Receipt, 3599*time.Second)) // hidden until t=3600
	delayed := f.receive(3001, 10)
	eqOffsets(t, "delay ends", delayed, 2)
	f.do(f.c.Ack(at(3002), delayed[0].Receipt))
	eqOffsets(t, "in-flight message aged out when visible again", f.receive(3600, 10))
	eqOffsets(t, "delayed beyond retention: never delivered", f.receive(7200, 10))
	if s := f.c.Stats(at(7200)); s.Expired != 3 || s.Held != 0 || f.c.Floor() != 4 {
		t.Fatalf("stats %+v floor %d", s, f.c.Floor())
	}
}

func TestPurge(t *testing.T) {
	f := newFixture(t, Config{Lookahead: 10})
	f.send(3, "")
	f.log.send(t0, "", time.Hour)
	f.send(20, "") // more than the window: some stay unread
	ds := f.receive(0, 2)
	evs := f.c.Purge(at(1), f.log.end)
	if f.c.Floor() != f.log.end || f.c.ReadPos() != f.log.end || f.c.Stats(at(1)).Held != 0 {
		t.Fatalf("after purge: floor %d read %d stats %+v", f.c.Floor(), f.c.ReadPos(), f.c.Stats(at(1)))
	}
	if _, err := f.c.Ack(at(2), ds[0].Receipt); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("receipt of a purged message: %v", err)
	}
	f.journal = append(f.journal, evs...)
	f.send(1, "")
	eqOffsets(t, "a message sent after the purge", f.receive(3, 10), f.log.end-1)
}

func TestFloorOutOfOrderAcks(t *testing.T) {
	f := newFixture(t, Config{})
	f.send(10, "")
	f.log.gap(2) // 10, 11 are not messages
	f.send(2, "")
	ds := f.receive(0, 12)
	steps := []struct {
		ack   int64
		floor int64
		runs  int
	}{
		// The gap 10-11 is a done run from the start.
		{5, 0, 2}, {3, 0, 3}, {9, 0, 3}, {4, 0, 2}, {0, 1, 2}, {1, 2, 2}, {2, 6, 1},
		{6, 7, 1}, {8, 7, 1}, {7, 12, 0}, {13, 12, 1}, {12, 14, 0},
	}
	for _, s := range steps {
		i := s.ack
		if i > 9 {
			i -= 2
		}
		if err := f.do(f.c.Ack(at(1), ds[i].Receipt)); err != nil {
			t.Fatal(err)
		}
		if f.c.Floor() != s.floor || len(f.c.done.runs) != s.runs {
			t.Fatalf("after ack %d: floor %d runs %v, want floor %d with %d runs", s.ack, f.c.Floor(), f.c.done.runs, s.floor, s.runs)
		}
	}
}

// TestRestartKeepsLeases: after a restart, an in-flight message stays hidden until its
// deadline, its receipt still works, and receive counts carry on.
func TestRestartKeepsLeases(t *testing.T) {
	cfg := Config{Visibility: 30 * time.Second, MaxReceives: 2}
	f := newFixture(t, cfg)
	f.send(3, "")
	ds := f.receive(0, 2)
	f.c = rebuild(t, cfg, f.journal)
	if f.c.ReadPos() != 2 || f.c.Floor() != 0 {
		t.Fatalf("read pos after replay %d, want 2 (the buffered message is re-read)", f.c.ReadPos())
	}
	eqOffsets(t, "in flight stays hidden", f.receive(10, 10), 2)
	if err := f.do(f.c.Ack(at(11), ds[1].Receipt)); err != nil {
		t.Fatalf("receipt from before the restart: %v", err)
	}
	again := f.receive(30, 10)
	eqOffsets(t, "visible at its deadline", again, 0)
	if again[0].ReceiveCount != 2 || again[0].FencingToken <= 3 {
		t.Fatalf("count or token went backwards: %+v", again[0])
	}
	f.c = rebuild(t, cfg, f.journal)
	_, evs, _ := f.c.Receive(at(60), 10, 0)
	if len(evs) == 0 {
		t.Fatal("no dead letter after restart")
	}
	if _, ok := evs[0].(DeadLettered); !ok {
		t.Fatalf("want the poison message dead-lettered, got %+v", evs)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg   Config
		field string
	}{
		{Config{}, ""},
		{Config{Visibility: 12 * time.Hour, MaxReceives: 1000, FIFO: true, Lookahead: MaxLookahead, Retention: 14 * 24 * time.Hour}, ""},
		{Config{Visibility: -1}, "Visibility"},
		{Config{Visibility: 13 * time.Hour}, "Visibility"},
		{Config{MaxExtension: time.Millisecond}, "MaxExtension"},
		{Config{MaxExtension: 5 * 24 * time.Hour}, "MaxExtension"},
		{Config{MaxReceives: -1}, "MaxReceives"},
		{Config{MaxReceives: 1001}, "MaxReceives"},
		{Config{Lookahead: -1}, "Lookahead"},
		{Config{Lookahead: MaxLookahead + 1}, "Lookahead"},
		{Config{Retention: time.Second}, "Retention"},
		{Config{Retention: 400 * 24 * time.Hour}, "Retention"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		var ce *ConfigError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%+v: %v", tt.cfg, err)
		case tt.field != "" && (!errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, ErrConfig)):
			t.Errorf("%+v: got %v, want a ConfigError on %s", tt.cfg, err, tt.field)
		}
		if _, err2 := New(tt.cfg); (err2 == nil) != (err == nil) {
			t.Errorf("New disagrees with Validate: %v", err2)
		}
	}
}

func TestNackReasonClipped(t *testing.T) {
	f := newFixture(t, Config{})
	f.send(1, "")
	d := f.receive(0, 1)[0]
	reason := strings.Repeat("é", MaxReasonLen) // 2 bytes each: the cut falls inside one
	evs, err := f.c.Nack(at(1), d.Receipt, 0, reason)
	if err != nil {
		t.Fatal(err)
	}
	got := evs[0].(Nacked).Reason
	if len(got) > MaxReasonLen || !strings.HasPrefix(reason, got) || len(got) < MaxReasonLen-1 {
		t.Fatalf("clipped reason has %d bytes", len(got))
	}
}

func TestStats(t *testing.T) {
	f := newFixture(t, Config{FIFO: true})
	f.log.send(at(0), "a", 0)
	f.log.send(at(1), "a", 0)
	f.log.send(at(2), "b", time.Minute)
	f.log.send(at(3), "c", 0)
	ds := f.receive(5, 1)
	s := f.c.Stats(at(5))
	want := Stats{InFlight: 1, Delayed: 1, Ready: 1, Blocked: 1, Held: 4, OldestSentAt: at(0), Receives: 1}
	if s != want {
		t.Fatalf("stats\n got  %+v\n want %+v", s, want)
	}
	f.do(f.c.Nack(at(6), ds[0].Receipt, 0, ""))
	f.receive(7, 10)
	if s := f.c.Stats(at(7)); s.Redeliveries != 1 || s.Receives != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDeadLetterJournaledLate: the broker journals a DeadLettered event only after the DLQ copy
// is durable, so a crash can keep a receive's deliveries but lose its dead letter. The replayed
// cursor must dead-letter the message again (at most duplicated) and keep the FIFO group sane.
func TestDeadLetterJournaledLate(t *testing.T) {
	cfg := Config{FIFO: true, MaxReceives: 1}
	f := newFixture(t, cfg)
	f.send(2, "a")
	f.receive(0, 10) // a0, count 1
	f.journal = append(f.journal, fill(f.c, &f.log, at(30))...)
	ds, evs, _ := f.c.Receive(at(30), 10, 0)
	eqOffsets(t, "a1 after a0 is dead-lettered", ds, 1)
	if _, ok := evs[0].(DeadLettered); !ok || len(evs) != 2 {
		t.Fatalf("events %+v", evs)
	}
	f.journal = append(f.journal, evs[1]) // the crash loses evs[0]
	f.c = rebuild(t, cfg, f.journal)
	if _, err := f.c.Extend(at(31), ds[0].Receipt, time.Minute); err != nil {
		t.Fatalf("a1's receipt after the restart: %v", err)
	}
	f.journal = append(f.journal, fill(f.c, &f.log, at(32))...)
	again, evs, _ := f.c.Receive(at(32), 10, 0)
	if len(again) != 0 || len(evs) != 1 {
		t.Fatalf("after restart: delivered %+v, events %+v", again, evs)
	}
	if dl, ok := evs[0].(DeadLettered); !ok || dl.Offset != 0 {
		t.Fatalf("want a0 dead-lettered again, got %+v", evs)
	}
	if s := f.c.Stats(at(32)); s.InFlight != 1 || s.Blocked != 0 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := f.c.Ack(at(33), ds[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if f.c.Floor() != 2 {
		t.Fatalf("floor %d", f.c.Floor())
	}
}

func TestNextDue(t *testing.T) {
	f := newFixture(t, Config{Visibility: 30 * time.Second})
	if _, ok := f.c.NextDue(); ok {
		t.Fatal("nothing waits on an empty cursor")
	}
	f.log.send(t0, "", time.Minute)
	f.send(1, "")
	f.receive(0, 10)
	if due, ok := f.c.NextDue(); !ok || !due.Equal(at(30)) {
		t.Fatalf("next due %v %v, want the visibility deadline", due, ok)
	}
}
