package replqueue

import "bytes"

// The deduplication window is replicated state: a key and the time it was stored are
// applied from the Put entry and kept in the snapshot, so a Put retried on a new leader
// within the window is still recognised. Its clock is the entry's (the proposing leader's,
// clamped), never a replica's own. Each key expires at its own deadline (the window of the
// Put that stored it): a later Put with a shorter window does not forget it early.
type dedupState struct {
	keys  map[string]dedupRec
	order []dedupKey // by insertion; expiry pops from the front
	head  int
}

type dedupRec struct {
	off   int64
	until int64 // unix ns: remembered while the time is before this
}

type dedupKey struct {
	key   string
	until int64
}

func newDedupState() dedupState { return dedupState{keys: map[string]dedupRec{}} }

func (d *dedupState) lookup(key string, now int64) (int64, bool) {
	r, ok := d.keys[key]
	if !ok || r.until <= now {
		return 0, false
	}
	return r.off, true
}

func (d *dedupState) record(key string, off, until int64) {
	d.keys[key] = dedupRec{off: off, until: until}
	d.order = append(d.order, dedupKey{key, until})
}

// expire forgets keys whose deadline passed, as far as the insertion order allows (one
// with a long window holds back the ones behind it: lookup checks the deadline anyway).
func (d *dedupState) expire(now int64) {
	for d.head < len(d.order) && d.order[d.head].until <= now {
		k := d.order[d.head]
		if r, ok := d.keys[k.key]; ok && r.until == k.until {
			delete(d.keys, k.key)
		}
		d.order[d.head] = dedupKey{}
		d.head++
	}
	if d.head > 1024 && d.head*2 > len(d.order) {
		d.order = append([]dedupKey(nil), d.order[d.head:]...)
		d.head = 0
	}
}

// live lists the remembered keys in insertion order, for the snapshot.
func (d *dedupState) live() []dedupKey {
	var out []dedupKey
	for _, k := range d.order[d.head:] {
		if r, ok := d.keys[k.key]; ok && r.until == k.until {
			out = append(out, k)
		}
	}
	return out
}

// put applies a Put at the machine's time: each message is stored unless its key is
// remembered, in order, so a key repeated within the entry stores the first only.
func (m *Machine) put(c *Command) Result {
	var r Result
	for i := range c.Msgs {
		if c.Msgs[i].Delay > m.cfg.Retention {
			r.Err = errDelay(c.Msgs[i].Delay, m.cfg.Retention)
			return r
		}
	}
	m.dedup.expire(m.now)
	for i := range c.Msgs {
		msg := &c.Msgs[i]
		if msg.Key != "" {
			if off, ok := m.dedup.lookup(msg.Key, m.now); ok {
				r.Puts = append(r.Puts, PutOutcome{Offset: off, Duplicate: true})
				continue
			}
			m.dedup.record(msg.Key, m.next, m.now+int64(c.Window))
		}
		// The entry's bytes belong to the host: keep a copy.
		s := &stored{body: bytes.Clone(msg.Body), attrs: msg.Attrs, sentAt: m.now, group: msg.Group, dedup: msg.DedupID}
		if msg.Delay > 0 {
			s.availAt = m.now + int64(msg.Delay)
		}
		r.Puts = append(r.Puts, PutOutcome{Offset: m.next})
		m.msgs[m.next] = s
		m.next++
	}
	return r
}
