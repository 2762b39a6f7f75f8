package api

import (
	"sync"
	"time"
)

// leases tracks which Consume stream holds which delivery, so a stream can
// keep at most max_in_flight unacked deliveries outstanding: Ack, AckBatch
// and Nack (on any connection) release a lease, Extend moves its deadline,
// and a lease whose visibility ran out stops counting.
type leases struct {
	mu    sync.Mutex // guards byKey and every stream's held map
	byKey map[string]*consumeStream
}

// consumeStream is one Consume call's share of the leases.
type consumeStream struct {
	held    map[string]time.Time // lease key -> visibility deadline
	changed chan struct{}        // capacity 1: a lease was released
	closed  bool                 // the stream ended: restore adds nothing
}

// heldLease is a lease taken from its stream by take, for restore.
type heldLease struct {
	s        *consumeStream
	key      string
	deadline time.Time
}

func newLeases() *leases { return &leases{byKey: map[string]*consumeStream{}} }

func leaseKey(queue, receipt string) string { return queue + "\x00" + receipt }

func (l *leases) open() *consumeStream {
	return &consumeStream{held: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

// close forgets every lease of s (the stream ended; its deliveries simply
// expire on the broker).
func (l *leases) close(s *consumeStream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range s.held {
		delete(l.byKey, k)
	}
	clear(s.held)
	s.closed = true
}

func (l *leases) add(s *consumeStream, queue, receipt string, deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := leaseKey(queue, receipt)
	l.byKey[k] = s
	s.held[k] = deadline
}

// release ends a lease after an ack or nack.
func (l *leases) release(queue, receipt string) {
	l.take(queue, receipt, nil)
}

// take ends a lease as release does and, when taken is not nil, appends
// it there so restore can give it back: the stream's ack frees the slot
// once the ack is applied, before it is durable, and a failed write must
// not leave the stream holding more than its limit.
func (l *leases) take(queue, receipt string, taken *[]heldLease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := leaseKey(queue, receipt)
	s := l.byKey[k]
	if s == nil {
		return
	}
	if taken != nil {
		*taken = append(*taken, heldLease{s, k, s.held[k]})
	}
	delete(l.byKey, k)
	delete(s.held, k)
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// restore gives back leases take ended, to streams still open.
func (l *leases) restore(taken []heldLease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range taken {
		if h.s.closed {
			continue
		}
		l.byKey[h.key] = h.s
		h.s.held[h.key] = h.deadline
	}
}

// extend moves a lease's deadline after an Extend.
func (l *leases) extend(queue, receipt string, deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := leaseKey(queue, receipt)
	if s := l.byKey[k]; s != nil {
		s.held[k] = deadline
	}
}

// outstanding counts s's live leases at now, dropping expired ones, and
// returns the earliest deadline still ahead (zero if none).
func (l *leases) outstanding(s *consumeStream, now time.Time) (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var next time.Time
	for k, d := range s.held {
		if !d.After(now) {
			delete(s.held, k)
			delete(l.byKey, k)
			continue
		}
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return len(s.held), next
}
