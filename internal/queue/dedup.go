package queue

import (
	"fmt"
	"time"
)

// Deduper remembers deduplication ids for a window (default 5 minutes): within it, a repeated
// id answers with the original message id and the broker stores nothing. It is pure like the
// Cursor. Memory is bounded by the ids recorded within one window: older ones are forgotten
// as time passes. It is not journaled: at start the broker rebuilds it by recording the
// messages of the log's last window (their dedup ids and send times are in the log).
type Deduper struct {
	window time.Duration
	ids    map[string]dedupRecord
	// order holds ids by record time so expiry pops from the front; head skips popped ones.
	order []dedupKey
	head  int
}

type dedupRecord struct {
	msgID string
	at    int64
}

type dedupKey struct {
	id string
	at int64
}

// NewDeduper returns a Deduper with the given window (0 means DefaultDedupWindow).
func NewDeduper(window time.Duration) (*Deduper, error) {
	if window == 0 {
		window = DefaultDedupWindow
	}
	if window < time.Second || window > MaxRetention {
		return nil, &ConfigError{"DedupWindow", window, "must be between 1s and 365 days"}
	}
	return &Deduper{window: window, ids: make(map[string]dedupRecord)}, nil
}

// Check reports the original message id if dedupID was recorded within the window before now.
func (d *Deduper) Check(now time.Time, dedupID string) (originalMessageID string, seen bool) {
	t := tn(now)
	d.expire(t)
	r, ok := d.ids[dedupID]
	if !ok || r.at <= t-int64(d.window) {
		return "", false
	}
	return r.msgID, true
}

// Record remembers dedupID for msgID from now on. Recording an id already held keeps the
// original: the window counts from the first send, as in SQS.
func (d *Deduper) Record(now time.Time, dedupID, msgID string) {
	t := tn(now)
	d.expire(t)
	if _, ok := d.ids[dedupID]; ok {
		return
	}
	// A record older than the newest one (a rebuild out of order) is still expired in time
	// order closely enough: it is kept until everything before it in the list expires.
	d.ids[dedupID] = dedupRecord{msgID: msgID, at: t}
	d.order = append(d.order, dedupKey{dedupID, t})
}

// Len is the number of ids remembered.
func (d *Deduper) Len() int { return len(d.ids) }

func (d *Deduper) expire(now int64) {
	limit := now - int64(d.window)
	for d.head < len(d.order) && d.order[d.head].at <= limit {
		k := d.order[d.head]
		if r, ok := d.ids[k.id]; ok && r.at == k.at {
			delete(d.ids, k.id)
		}
		d.order[d.head] = dedupKey{}
		d.head++
	}
	// Compact once the dead prefix dominates, so the list's memory follows the window.
	if d.head > 1024 && d.head*2 > len(d.order) {
		d.order = append([]dedupKey(nil), d.order[d.head:]...)
		d.head = 0
	}
}

// String describes the deduper for debugging.
func (d *Deduper) String() string {
	return fmt.Sprintf("Deduper{window: %v, ids: %d}", d.window, len(d.ids))
}
