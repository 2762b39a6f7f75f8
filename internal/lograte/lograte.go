// Package lograte bounds a log line that anyone can make repeat — a refused connection, a
// failed handshake, a misdirected request — to one per window, saying how many were held
// back since the last: the event stays visible without letting whoever causes it fill
// the log. Counting every event is the caller's (a metric).
//
// It owns the window only: it must never log, keep keys, or read the clock itself.
package lograte

import (
	"sync"
	"time"
)

// Limiter lets one line through per Every. The zero Limiter with Every set is ready; it
// is safe for concurrent use.
type Limiter struct {
	Every time.Duration

	mu   sync.Mutex
	last time.Time
	held int
}

// Allow reports whether a line may be logged at now and, if so, how many were held back
// since the last one logged.
func (l *Limiter) Allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.Every {
		l.held++
		return false, 0
	}
	n := l.held
	l.last, l.held = now, 0
	return true, n
}
