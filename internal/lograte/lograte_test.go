package lograte

import (
	"testing"
	"time"
)

// TestLogLimiter: one warning a window; the next one says how many were held back.
func TestLogLimiter(t *testing.T) {
	l := Limiter{Every: 10 * time.Second}
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		at         time.Duration
		warn       bool
		suppressed int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{9 * time.Second, false, 0},
		{10 * time.Second, true, 2},
		{11 * time.Second, false, 0},
		{time.Minute, true, 1},
		{2 * time.Minute, true, 0},
	} {
		warn, n := l.Allow(t0.Add(step.at))
		if warn != step.warn || n != step.suppressed {
			t.Errorf("at %v: allow = %v, %d; want %v, %d", step.at, warn, n, step.warn, step.suppressed)
		}
	}
}
