package producer

import "time"

// Expiry by idleness: Kafka forgets a producer that wrote nothing to a partition for
// producer.id.expiration.ms (a day by default). Without it a partition whose log is never
// trimmed (retention off, a compacted topic) remembers every idempotent producer that
// ever wrote to it — a client gets a new producer id each time it starts — in memory, in
// every snapshot and in every replicated checkpoint. A producer forgotten and back later is
// accepted whatever its sequence (CheckLocked), as Kafka does after the expiry.
//
// Time is counted in passes, never read on the produce path: RecordLocked stamps the
// producer with the last pass's time, so a producer is forgotten between idle and idle plus
// one pass interval after its last batch, and one loaded from a snapshot or checkpoint
// (no stamp) counts from the first pass after.

// Idle is a producer an expiry pass found idle, with its last batch's base offset: what
// ForgetIdle checks, so that a producer that wrote again since is kept.
type Idle struct {
	ID       int64
	LastBase int64 // -1: it has no batch
}

// passEvery divides the expiry period into the passes that walk the producers.
const passEvery = 16

// IdleSince stamps now as the pass time and lists the producers that recorded no batch
// since idle before now, but those keep names (an open transaction), in no order. It
// walks the producers at most once every idle/16; between walks it only returns nil, and
// nil while idle is not positive.
func (ps *State) IdleSince(now time.Time, idle time.Duration, keep func(int64) bool) []Idle {
	if idle <= 0 {
		return nil
	}
	t := now.UnixNano()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if t < ps.nextPass {
		return nil
	}
	ps.passAt, ps.nextPass = t, t+int64(idle/passEvery)
	var out []Idle
	for id, e := range ps.m {
		if e.seen == 0 {
			e.seen = t // loaded since the last pass: counts from now
			continue
		}
		if t-e.seen < int64(idle) || keep != nil && keep(id) {
			continue
		}
		last := int64(-1)
		if n := len(e.recent); n > 0 {
			last = e.recent[n-1].Base
		}
		out = append(out, Idle{ID: id, LastBase: last})
	}
	return out
}

// Forget forgets the producers of idle whose last batch is still the one listed, and
// returns their ids. Applied on every replica alike from the same list, it keeps them in
// step (IdleSince's answer is one node's clock: its leader's).
func (ps *State) Forget(idle []Idle) []int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var gone []int64
	for _, x := range idle {
		e := ps.m[x.ID]
		if e == nil {
			continue
		}
		last := int64(-1)
		if k := len(e.recent); k > 0 {
			last = e.recent[k-1].Base
		}
		if last == x.LastBase {
			delete(ps.m, x.ID)
			ps.changed++
			gone = append(gone, x.ID)
		}
	}
	return gone
}
