package storage

import (
	"context"
	"slices"
	"sync"
	"time"
)

// The scrub.
//
// Recovery reads only the tail of the active segment, so after Open the
// sealed segments, and the active one before where recovery started, hold
// bytes no one in this process has checked. Reads check what they serve
// (verify.go); the scrub checks the rest in the background so that damage
// is found, quarantined and counted before a consumer needs the bytes, and
// so that ReadSection soon serves every segment with sendfile alone. One
// goroutine per FileCache walks its logs in turn, reading at most
// ScrubBytesPerSec; it runs only while some log has bytes left to check.

// scrubStepBytes is how much one scrub step checks before the scrub sleeps
// (at the default rate, about 30 ms of reading) and moves to the next log.
const scrubStepBytes = 1 << 20

// scrubber is a FileCache's background scrub.
type scrubber struct {
	rate int64 // bytes per second; negative: off

	mu      sync.Mutex
	logs    []*Log
	running bool
}

// add schedules l for scrubbing.
func (sc *scrubber) add(l *Log) {
	if sc.rate < 0 {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !slices.Contains(sc.logs, l) {
		sc.logs = append(sc.logs, l)
	}
	if !sc.running {
		sc.running = true
		go sc.run()
	}
}

// remove unschedules l (it is closing, or has nothing left to check).
func (sc *scrubber) remove(l *Log) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if i := slices.Index(sc.logs, l); i >= 0 {
		sc.logs = slices.Delete(sc.logs, i, i+1)
	}
}

// run scrubs the scheduled logs in turn until none is left.
func (sc *scrubber) run() {
	for {
		sc.mu.Lock()
		if len(sc.logs) == 0 {
			sc.running = false
			sc.mu.Unlock()
			return
		}
		l := sc.logs[0]
		sc.logs = append(sc.logs[1:], l)
		sc.mu.Unlock()
		n, more := l.scrubStep(scrubStepBytes)
		if !more {
			sc.remove(l)
		}
		if n > 0 && sc.rate > 0 {
			time.Sleep(time.Duration(n * int64(time.Second) / sc.rate))
		}
	}
}

// needsScrub reports whether some segment has bytes not checked yet.
func (l *Log) needsScrub() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		if !s.ver.all.Load() {
			return true
		}
	}
	return false
}

// Scrub checks now, ignoring the background scrub's rate, every byte of the
// log not checked since Open: damaged batches are quarantined as a read
// would (see Quarantined). For tests and for an operator's explicit check;
// the background scrub does the same work slowly.
func (l *Log) Scrub(ctx context.Context) error {
	for ctx.Err() == nil {
		if _, more := l.scrubStep(64 << 20); !more {
			return l.scrubErr()
		}
	}
	return ctx.Err()
}

// scrubErr is why the last scrub step stopped early, if it did.
func (l *Log) scrubErr() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return nil
}

// scrubStep checks up to about budget bytes of the first segment with
// unchecked bytes. It returns how many it read and whether any are left.
func (l *Log) scrubStep(budget int64) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, false
	}
	for i, s := range l.segs {
		limit := s.committed.Load()
		pos, end, first, ok := s.ver.gap(limit, s.base)
		if !ok {
			continue
		}
		res := s.scanFrom(nil, pos, first, end, budget)
		s.ver.add(pos, res.end, first, res.next, s.size.Load())
		if res.err == nil {
			return res.end - pos, true
		}
		ce, dmg := asDamage(res.err)
		if !dmg {
			l.opts.Logger.Warn("storage: scrub cannot read a segment; it is checked when read", "segment", s.path(logSuffix), "err", res.err)
			return res.end - pos, false
		}
		r, err := l.quarantineDamage(i, ce, limit)
		if err != nil {
			l.opts.Logger.Warn("storage: scrub stopped at damage it cannot bound", "segment", s.path(logSuffix), "err", err)
			return res.end - pos, false
		}
		s.ver.add(r.pos, r.end, r.first, r.last+1, s.size.Load())
		return r.end - pos, true
	}
	return 0, false
}
