package linger

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestPolicy(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name       string
		members    int
		took       time.Duration
		max        time.Duration
		wantExpect int
		wantWait   time.Duration
	}{
		{"nothing committed yet", 0, 0, 0, 0, 0},
		{"one member never lingers", 1, ms, 0, 0, 0},
		{"several members: half a commit", 8, 200 * time.Microsecond, 0, 8, 100 * time.Microsecond},
		{"capped at DefaultMax", 8, 4 * ms, 0, 8, DefaultMax},
		{"capped at Max", 8, 4 * ms, ms, 8, ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy{Max: tc.max}
			if tc.members > 0 {
				p.Committed(tc.members, tc.took)
			}
			exp, w := p.Next()
			if exp != tc.wantExpect || w != tc.wantWait {
				t.Fatalf("Next = %d, %v; want %d, %v", exp, w, tc.wantExpect, tc.wantWait)
			}
		})
	}
}

func TestWait(t *testing.T) {
	kick, stop := make(chan struct{}, 1), make(chan struct{})
	var n atomic.Int64
	pending := func() int { return int(n.Load()) }
	if got := Wait(3, 0, pending, kick, stop); got != 0 {
		t.Fatalf("a wait of 0 returned %d, want what is pending (0)", got)
	}
	n.Store(3)
	if got := Wait(3, time.Hour, pending, kick, stop); got != 3 {
		t.Fatalf("expect already pending: got %d", got)
	}
	n.Store(1)
	if got := Wait(3, time.Millisecond, pending, kick, stop); got != 1 {
		t.Fatalf("nobody came: got %d, want 1", got)
	}
	// Members arrive one by one, each with a kick: Wait returns when the
	// last arrives (the hour would fail the test by its timeout).
	go func() {
		for range 2 {
			n.Add(1)
			kick <- struct{}{}
		}
	}()
	if got := Wait(3, time.Hour, pending, kick, stop); got != 3 {
		t.Fatalf("everyone came back: got %d", got)
	}
	close(stop)
	n.Store(0)
	if got := Wait(3, time.Hour, pending, kick, stop); got != 0 {
		t.Fatalf("stop closed: got %d", got)
	}
}
