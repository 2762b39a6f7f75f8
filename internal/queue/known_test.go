package queue

import (
	"testing"
	"time"
)

// TestKnownEndAfterRestore: what a restarted cursor knows reaches past its rewound read
// position (in flight and acked messages beyond a never-journaled buffered one), and
// Unfinished counts the offsets of a range that still owe delivery.
func TestKnownEndAfterRestore(t *testing.T) {
	c := mustNew(t, Config{Visibility: time.Minute})
	l := &testLog{}
	for range 10 {
		l.send(at(0), "", 0)
	}
	fill(c, l, at(0))
	ds, _, err := c.Receive(at(1), 6, 0) // 0..5 in flight, 6..9 buffered (not journaled)
	if err != nil || len(ds) != 6 {
		t.Fatalf("receive: %d, %v", len(ds), err)
	}
	for _, d := range ds[:3] { // ack 0..2: the floor moves to 3
		if _, err := c.Ack(at(2), d.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Ack(at(2), ds[5].Receipt); err != nil { // a run at 5
		t.Fatal(err)
	}
	if got := c.KnownEnd(); got != 10 {
		t.Errorf("live KnownEnd %d, want 10", got)
	}
	r, err := Restore(c.Config(), c.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	// The restored cursor has forgotten the buffer (6..9) and rewinds to 6; it knows 3, 4
	// (in flight) and 5 (acked).
	if rp, ke := r.ReadPos(), r.KnownEnd(); rp != 6 || ke != 6 {
		t.Errorf("restored: ReadPos %d KnownEnd %d, want 6 and 6", rp, ke)
	}
	for _, tc := range []struct {
		a, b, want int64
	}{{0, 10, 6}, {3, 6, 2}, {5, 6, 0}, {4, 4, 0}, {6, 10, 4}} {
		if got := r.Unfinished(tc.a, tc.b); got != tc.want {
			t.Errorf("Unfinished(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	// In flight past every done offset still counts as known.
	r2, _ := Restore(c.Config(), c.Snapshot())
	if err := r2.Apply(Skipped{From: 3, To: 5}); err != nil {
		t.Fatal(err)
	}
	if ke := r2.KnownEnd(); ke != 6 {
		t.Errorf("KnownEnd %d after skipping 3..4, want 6", ke)
	}
}
