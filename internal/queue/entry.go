package queue

import "time"

// entry is the cursor's state for one message it currently knows and has not finished: read
// from the log and buffered, delayed, in flight, or visible again for redelivery.
type entry struct {
	off     int64
	group   string
	sentAt  int64 // Unix ns; retention and "age of the oldest message" count from here
	at      int64 // next moment it may be delivered: end of send delay, nack delay or visibility
	firstAt int64 // first receive
	lastAt  int64 // receive that started the current delivery; the extension bound counts from it
	token   uint64
	count   int32
	// inFlight: the latest action was a delivery (not a nack), so `at` is a visibility deadline.
	inFlight bool
	where    uint8 // which structure holds it; see the w* constants
	idx      int   // position in the heap named by where
	reason   string
}

// Where an entry lives. The kind counters are kept per place, so every move between places
// goes through unlink/link and the counts cannot drift.
const (
	wNone    uint8 = iota // not placed (being created or removed); not counted
	wBlocked              // FIFO: behind its group's head; in no heap
	wReady                // visible now: in the ready heap, ordered by offset
	wTimer                // waiting for `at`: in the timer heap
)

// Kinds counted for Wants and Stats.
const (
	kBlocked = iota
	kReadyNew
	kReadyRetry
	kDelayed
	kInFlight
	nKinds
)

func (e *entry) kind() int {
	switch e.where {
	case wBlocked:
		return kBlocked
	case wReady:
		if e.count == 0 {
			return kReadyNew
		}
		return kReadyRetry
	default:
		if e.inFlight {
			return kInFlight
		}
		return kDelayed
	}
}

// heap is a binary min-heap of entries that records each entry's index, so an entry can be
// removed from the middle in O(log n) when it is acked or nacked.
type heap struct {
	es   []*entry
	less func(a, b *entry) bool
}

func byOffset(a, b *entry) bool { return a.off < b.off }

// byTime breaks ties by offset so the order, and therefore a replay, is deterministic.
func byTime(a, b *entry) bool { return a.at < b.at || (a.at == b.at && a.off < b.off) }

func (h *heap) peek() *entry {
	if len(h.es) == 0 {
		return nil
	}
	return h.es[0]
}

func (h *heap) push(e *entry) {
	e.idx = len(h.es)
	h.es = append(h.es, e)
	h.up(e.idx)
}

func (h *heap) remove(i int) {
	last := len(h.es) - 1
	if i != last {
		h.swap(i, last)
	}
	h.es[last].idx = -1
	h.es[last] = nil
	h.es = h.es[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	// Give memory back after a burst: a heap that was once large must not stay large.
	if cap(h.es) > 1024 && len(h.es) < cap(h.es)/4 {
		h.es = append([]*entry(nil), h.es...)
	}
}

func (h *heap) swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.es[i].idx = i
	h.es[j].idx = j
}

func (h *heap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.es[i], h.es[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *heap) down(i int) bool {
	start := i
	n := len(h.es)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(h.es[r], h.es[l]) {
			m = r
		}
		if !h.less(h.es[m], h.es[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

// Times are kept as Unix nanoseconds, with 0 for "unset", to keep entries small.
func tn(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nt(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
