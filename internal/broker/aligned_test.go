package broker

import (
	"testing"
	"time"
)

// TestUntilAligned: the wait ends on a wall-clock multiple of the period, within one
// period, so passes of one period (and of periods that divide each other) started at
// different moments run at the same instants.
func TestUntilAligned(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 200 * time.Millisecond, 15 * time.Second} {
		before := time.Now()
		w := untilAligned(d)
		after := time.Now()
		if w <= 0 || w > d {
			t.Fatalf("untilAligned(%v) = %v, not within (0, %v]", d, w, d)
		}
		// The instant it names, a multiple of d, lies within [before, after] + w.
		lo, hi := before.Add(w).UnixNano(), after.Add(w).UnixNano()
		if m := hi / int64(d) * int64(d); m < lo {
			t.Fatalf("untilAligned(%v) = %v: no multiple of %v between %d and %d", d, w, d, lo, hi)
		}
	}
}
