package load

import (
	"testing"
	"time"
)

// The histogram's quantiles are within its bucket width (<1%) of the exact
// ones, and its maximum is exact.
func TestHistQuantiles(t *testing.T) {
	var h Hist
	for i := 1; i <= 100_000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {0.999, 99900 * time.Microsecond}} {
		got := h.Quantile(c.q)
		if d := got - c.want; d < -c.want/100 || d > c.want/100 {
			t.Errorf("q%.3f = %v, want %v ±1%%", c.q, got, c.want)
		}
	}
	if got := h.Quantile(1); got != 100*time.Millisecond {
		t.Errorf("max = %v", got)
	}
	for v := uint64(0); v < 1<<20; v += 997 {
		if lo := uint64(valueOf(bucketOf(v))); lo+lo/100+1 < v || v+v/100+1 < lo {
			t.Fatalf("value %d lands in bucket %d of value %d", v, bucketOf(v), lo)
		}
	}
}

func TestStampRoundTrip(t *testing.T) {
	p := newPayload(64)
	due := time.Unix(1_800_000_000, 123456789)
	p.stamp(due, 42)
	got, seq, ok := parseStamp(p)
	if !ok || !got.Equal(due) || seq != 42 {
		t.Fatalf("parse = %v %d %v", got, seq, ok)
	}
}
