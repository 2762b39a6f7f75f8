package producer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/sluice-mq/sluice/internal/batch"
)

// Kafka keeps the last five batches per producer and partition, because a
// producer may have at most five requests in flight: any retry is one of them.
const producerWindow = 5

// ScanOffsets is how much of a partition's tail is scanned at open
// to rebuild producer state when there is no usable snapshot (see
// snapshot.go). A producer whose last batch is older than that is
// forgotten; its next batch is then accepted whatever its sequence (as Kafka
// does once producer state expired), which only weakens duplicate detection
// for retries older than the window.
const ScanOffsets = 4096

// Range is one stored batch of an idempotent producer.
type Range struct {
	First, Last int32 // sequence numbers
	Base        int64 // base offset in the log
}

type entry struct {
	epoch  int16
	recent []Range // oldest first, at most producerWindow
	seen   int64   // the expiry pass's time when a batch was last recorded (expire.go); 0: none since loaded
}

// State is a partition's idempotent producers. Its lock (Lock, Unlock)
// is held while an idempotent batch is checked, placed in the log and
// recorded; the *Locked methods need it.
type State struct {
	// mu guards m. It is held from an idempotent batch's check to its
	// placement and record (not across its sync), so batches of one producer
	// reach the log in sequence order and a retry racing its original finds
	// it; the batches of many producers then share the log's next sync.
	mu      sync.Mutex
	m       map[int64]*entry
	changed int   // batches recorded since the last snapshot
	snapAt  int64 // offset the last snapshot covers
	// gen is the log generation m is exact for (ReconcileLocked): recorded
	// batches are durable, or placed at gen and on their way.
	gen int64
	// passAt is the time of the last expiry pass (unix nanoseconds), which
	// RecordLocked stamps on the producer (expire.go); nextPass is when the next
	// may walk the producers.
	passAt, nextPass int64
}

func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

func lastSeq(h batch.Header) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

// CheckLocked decides what to do with a batch: a duplicate of a stored one
// (returned), a new one (nil, nil) or a refusal. Called with mu held.
func (ps *State) CheckLocked(h batch.Header) (*Range, error) {
	e := ps.m[h.ProducerID]
	switch {
	case e == nil:
		return nil, nil
	case h.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrFenced, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, want 0", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	for i := range e.recent {
		if r := e.recent[i]; r.First == h.BaseSequence && r.Last == lastSeq(h) {
			return &r, nil
		}
	}
	if len(e.recent) > 0 {
		if want := nextSeq(e.recent[len(e.recent)-1].Last); h.BaseSequence != want {
			return nil, fmt.Errorf("%w: producer %d sent sequence %d, want %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, want)
		}
	}
	return nil, nil
}

// RecordLocked notes a stored batch. Called with mu held.
func (ps *State) RecordLocked(h batch.Header, base int64) {
	if ps.m == nil {
		ps.m = map[int64]*entry{}
	}
	e := ps.m[h.ProducerID]
	if e == nil || h.ProducerEpoch != e.epoch {
		e = &entry{epoch: h.ProducerEpoch}
		ps.m[h.ProducerID] = e
	}
	e.recent = append(e.recent, Range{First: h.BaseSequence, Last: lastSeq(h), Base: base})
	e.seen = ps.passAt
	ps.changed++
	if len(e.recent) > producerWindow {
		e.recent = append(e.recent[:0], e.recent[len(e.recent)-producerWindow:]...)
	}
}

// Lock and Unlock hold the state from an idempotent batch's check to its record.
func (ps *State) Lock()   { ps.mu.Lock() }
func (ps *State) Unlock() { ps.mu.Unlock() }

// Continues reports whether batch b is the one an idempotent producer sends
// right after a: same producer and epoch, the next sequence.
func Continues(a, b batch.Header) bool {
	return a.ProducerID >= 0 && b.ProducerID == a.ProducerID && b.ProducerEpoch == a.ProducerEpoch &&
		b.BaseSequence == nextSeq(lastSeq(a))
}

// StoredLocked reports whether a batch with h's producer, epoch and
// sequence range is among the producer's recent batches (a retry).
// Called with mu held.
func (ps *State) StoredLocked(h batch.Header) bool {
	e := ps.m[h.ProducerID]
	if e == nil || e.epoch != h.ProducerEpoch {
		return false
	}
	for _, r := range e.recent {
		if r.First == h.BaseSequence && r.Last == lastSeq(h) {
			return true
		}
	}
	return false
}

// Active is one idempotent producer a partition remembers.
type Active struct {
	ID           int64
	Epoch        int16
	LastSequence int32 // -1 before its first batch here
	LastBase     int64 // its last batch's base offset (-1: none)
}

// Len is how many producers the partition remembers.
func (ps *State) Len() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.m)
}

// Producers lists the partition's remembered producers by id, for
// DescribeProducers.
func (ps *State) Producers() []Active {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]Active, 0, len(ps.m))
	for id, e := range ps.m {
		a := Active{ID: id, Epoch: e.epoch, LastSequence: -1, LastBase: -1}
		if n := len(e.recent); n > 0 {
			a.LastSequence, a.LastBase = e.recent[n-1].Last, e.recent[n-1].Base
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Active) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
