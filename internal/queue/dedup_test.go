package queue

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestDeduper(t *testing.T) {
	d, err := NewDeduper(0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		sec    int
		id     string
		record string // message id to record when not seen
		want   string // original id expected, "" for not seen
	}{
		{0, "order-101", "m1", ""},
		{10, "order-101", "", "m1"},  // a retry within the window
		{20, "order-102", "m2", ""},  // another id is independent
		{299, "order-101", "", "m1"}, // still within 5 minutes of the first send
		{300, "order-101", "m3", ""}, // the window counts from the first send: now it is new
		{310, "order-102", "", "m2"},
		{320, "order-102", "m4", ""},
		{330, "order-101", "", "m3"},
	}
	for _, s := range steps {
		orig, seen := d.Check(at(s.sec), s.id)
		if seen != (s.want != "") || orig != s.want {
			t.Fatalf("t=%d %s: got %q %v, want %q", s.sec, s.id, orig, seen, s.want)
		}
		if !seen && s.record != "" {
			d.Record(at(s.sec), s.id, s.record)
		}
	}
	d.Record(at(330), "order-101", "m9") // recording a held id keeps the original
	if orig, _ := d.Check(at(331), "order-101"); orig != "m3" {
		t.Fatalf("original replaced by %q", orig)
	}
}

func TestDeduperBounded(t *testing.T) {
	d, _ := NewDeduper(time.Minute)
	for i := range 100_000 {
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond) // 100 ids a second
		d.Record(now, fmt.Sprint(i), fmt.Sprint(i))
		if d.Len() > 6001 || len(d.order)-d.head > 6001 || cap(d.order) > 4*6001+2048 {
			t.Fatalf("at %d: %d ids, order %d/%d", i, d.Len(), len(d.order)-d.head, cap(d.order))
		}
	}
}

func TestDeduperWindowValidation(t *testing.T) {
	for _, w := range []time.Duration{-time.Second, time.Millisecond, 400 * 24 * time.Hour} {
		if _, err := NewDeduper(w); !errors.Is(err, ErrConfig) {
			t.Errorf("window %v: %v", w, err)
		}
	}
}
