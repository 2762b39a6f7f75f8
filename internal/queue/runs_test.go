package queue

import (
	"fmt"
	"testing"
	"time"
)

func TestDoneSet(t *testing.T) {
	var d doneSet
	steps := []struct {
		a, b int64
		want string // floor and runs after the step
	}{
		{5, 6, "0 [{5 6}]"},
		{8, 10, "0 [{5 6} {8 10}]"},
		{6, 8, "0 [{5 10}]"}, // bridges two runs
		{12, 13, "0 [{5 10} {12 13}]"},
		{4, 14, "0 [{4 14}]"}, // swallows both
		{0, 4, "14 []"},       // touches the floor: the floor jumps
		{3, 20, "20 []"},      // overlaps the floor
		{25, 30, "20 [{25 30}]"},
		{30, 31, "20 [{25 31}]"}, // extends the newest run
		{22, 22, "20 [{25 31}]"}, // empty
	}
	for _, s := range steps {
		d.add(s.a, s.b)
		if got := fmt.Sprint(d.floor, " ", d.runs); got != s.want && !(s.want[len(s.want)-2:] == "[]" && got == fmt.Sprint(d.floor, " []")) {
			t.Fatalf("after add(%d, %d): %s, want %s", s.a, s.b, got, s.want)
		}
	}
	for off, want := range map[int64]bool{0: true, 19: true, 20: false, 24: false, 25: true, 30: true, 31: false} {
		if d.contains(off) != want {
			t.Errorf("contains(%d) = %v", off, !want)
		}
	}
	var parts []string
	d.notDone(10, 40, func(a, b int64) { parts = append(parts, fmt.Sprint(a, "-", b)) })
	if fmt.Sprint(parts) != "[20-25 31-40]" {
		t.Errorf("notDone: %v", parts)
	}
	if d.next(10) != 20 || d.next(26) != 31 || d.next(33) != 33 {
		t.Errorf("next: %d %d %d", d.next(10), d.next(26), d.next(33))
	}
}

// TestReplayOutOfOrderGroup: a journal may hold a group's later delivery before its earlier
// one's (the broker journals dead letters last); the group's order must come out right.
func TestReplayOutOfOrderGroup(t *testing.T) {
	c := mustNew(t, Config{FIFO: true})
	for _, ev := range []Event{
		Delivered{Offset: 5, Token: 2, Count: 1, At: at(0), Deadline: at(30), FirstAt: at(0), GroupID: "a"},
		Delivered{Offset: 3, Token: 1, Count: 1, At: at(0), Deadline: at(30), FirstAt: at(0), GroupID: "a"},
	} {
		if err := c.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if g := c.groups["a"]; len(g.q) != 2 || g.q[0].off != 3 || g.q[1].where != wBlocked {
		t.Fatalf("group order wrong")
	}
	if err := c.Apply(DeadLettered{Offset: 3, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(at(1)); s.InFlight != 1 || s.Blocked != 0 || s.Held != 1 {
		t.Fatalf("after the head left: %+v", s)
	}
}

func TestExpiredRunsMerge(t *testing.T) {
	c := mustNew(t, Config{Retention: time.Hour})
	old := at(-7200)
	n, evs := c.Offer(at(0), []Meta{{Offset: 0, SentAt: old}, {Offset: 1, SentAt: old}, {Offset: 3, SentAt: old}, {Offset: 4, SentAt: at(0)}})
	want := []Event{Expired{From: 0, To: 2}, Skipped{From: 2, To: 3}, Expired{From: 3, To: 4}}
	if n != 4 || fmt.Sprint(evs) != fmt.Sprint(want) || c.Floor() != 4 {
		t.Fatalf("offer: n %d events %v floor %d", n, evs, c.Floor())
	}
}

// TestDeadLetterAfterPurge: a dead letter journaled after a purge that finished the same
// message applies, and counts, without changing anything else.
func TestDeadLetterAfterPurge(t *testing.T) {
	c := mustNew(t, Config{})
	c.Apply(Delivered{Offset: 0, Token: 1, Count: 1, At: at(0), Deadline: at(30)})
	c.Apply(Purged{UpTo: 5})
	before := c.Snapshot()
	if err := c.Apply(DeadLettered{Offset: 0, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if c.Stats(at(1)).DeadLettered != 1 || c.Floor() != 5 || len(c.Snapshot()) != len(before) {
		t.Fatalf("stats %+v floor %d", c.Stats(at(1)), c.Floor())
	}
}

func TestApplyRefusesMisfits(t *testing.T) {
	c := mustNew(t, Config{})
	for _, ev := range []Event{
		Acked{Offset: 1}, Extended{Offset: 1}, Nacked{Offset: 1}, DeadLettered{Offset: 1},
		Delivered{Offset: -1, Token: 1, Count: 1}, Delivered{Offset: 1, Token: 0, Count: 1},
		Expired{From: 3, To: 2}, Skipped{From: -1, To: 2}, nil,
	} {
		before := c.Snapshot()
		if err := c.Apply(ev); err == nil {
			t.Errorf("%#v applied", ev)
		}
		if string(c.Snapshot()) != string(before) {
			t.Errorf("%#v changed the state", ev)
		}
	}
	c.Apply(Skipped{From: 0, To: 2})
	if err := c.Apply(Delivered{Offset: 1, Token: 1, Count: 1}); err == nil {
		t.Error("delivery of a done offset applied")
	}
}
