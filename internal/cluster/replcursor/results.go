package replcursor

import "sync"

// MaxResults bounds the results kept for proposals whose caller gave up waiting (or that a
// restart re-applied with nobody waiting).
const MaxResults = 4096

// Results are what apply computed for this node's own entries, keyed by log index, each
// with the request number the proposer gave: the proposer takes its result once its entry
// applied, and a result at its index with another request (an entry of a previous run)
// is not its. Safe for concurrent use.
type Results[T any] struct {
	mu sync.Mutex
	m  map[uint64]kept[T]
}

type kept[T any] struct {
	req uint64
	v   T
}

// Keep records the result of the entry at index proposed as request req, dropping the
// oldest ones once there are too many.
func (r *Results[T]) Keep(index, req uint64, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[uint64]kept[T]{}
	}
	r.m[index] = kept[T]{req, v}
	if len(r.m) <= MaxResults {
		return
	}
	for i := range r.m {
		if i+MaxResults/2 < index {
			delete(r.m, i)
		}
	}
}

// Take removes and returns the result at index if it is request req's.
func (r *Results[T]) Take(index, req uint64) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.m[index]
	if !ok || k.req != req {
		var zero T
		return zero, false
	}
	delete(r.m, index)
	return k.v, true
}

// Reset drops every result (a snapshot restored: nobody waits for them any more).
func (r *Results[T]) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m = nil
}

// Len is how many results are kept.
func (r *Results[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
