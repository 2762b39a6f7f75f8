package producer

import "slices"

// Undo remembers producers' state as it was before batches were recorded, so that what
// they recorded can be taken back: a replicated partition applies an entry's batches one
// by one, and when the disk has no room for one of them it cuts those it appended off its
// log and applies the whole entry again later (the broker's replicaLog.Apply). Rebuilding
// the state from the log instead would lose producers the log no longer holds, and the
// replica would decide later entries unlike the others.
type Undo struct {
	saved []savedEntry
}

// savedEntry is one producer's entry as it was, by value: keeping it costs no allocation
// on the apply path (the window holds at most producerWindow batches; more, only from a
// snapshot of another build, go to spill).
type savedEntry struct {
	id     int64
	known  bool
	epoch  int16
	n      int
	recent [producerWindow]Range
	spill  []Range
}

// Reset forgets what was remembered (the entry was applied whole).
func (u *Undo) Reset() {
	u.saved = u.saved[:0]
}

// KeepLocked remembers producer id's state, once per Reset, before a batch of it is
// recorded. Called with mu held.
func (ps *State) KeepLocked(u *Undo, id int64) {
	for i := range u.saved {
		if u.saved[i].id == id {
			return
		}
	}
	u.saved = append(u.saved, savedEntry{id: id})
	s := &u.saved[len(u.saved)-1]
	if e := ps.m[id]; e != nil {
		s.known, s.epoch = true, e.epoch
		if len(e.recent) <= len(s.recent) {
			s.n = copy(s.recent[:], e.recent)
		} else {
			s.spill = slices.Clone(e.recent)
		}
	}
}

// UndoLocked puts back every producer's state u remembered, and resets u. Called with
// mu held.
func (ps *State) UndoLocked(u *Undo) {
	for i := range u.saved {
		s := &u.saved[i]
		if !s.known {
			delete(ps.m, s.id)
			continue
		}
		e := &entry{epoch: s.epoch, recent: slices.Clone(s.recent[:s.n])}
		if s.spill != nil {
			e.recent = s.spill
		}
		if ps.m == nil {
			ps.m = map[int64]*entry{}
		}
		ps.m[s.id] = e
	}
	u.Reset()
}
