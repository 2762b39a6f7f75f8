package replpart

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// errRefused is the fake log's deterministic refusal (a Kafka log's out-of-order sequence).
var errRefused = errors.New("fake: refused")

// rec is one batch the fake log stored.
type rec struct {
	Base  int64
	Term  uint64
	Batch string
}

// fakeLog is an in-memory Log. A batch holds 1 + len%3 records; a batch "bad…" is refused;
// a batch "key:…" whose key was stored before is a duplicate (an idempotent producer's
// retry). Its durable copy is taken at Checkpoint, and crash drops back to it, as a power
// cut loses what the broker's log never fsynced.
type fakeLog struct {
	mu          sync.Mutex
	recs        []rec
	next        int64
	durable     []rec
	checkpoints int
	restores    int // Restore calls with a checkpoint (not nil)
	cuts        int // Restore calls that cut batches the log held (it had applied past the checkpoint)
	refusals    int // Restore calls refused: the group stopped here
	failApply   error
}

func records(b []byte) int64 { return 1 + int64(len(b)%3) }

func (l *fakeLog) Apply(term uint64, batches [][]byte) ([]BatchResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failApply != nil {
		return nil, l.failApply
	}
	out := make([]BatchResult, len(batches))
	for i, b := range batches {
		s := string(b)
		if strings.HasPrefix(s, "bad") {
			out[i].Err = fmt.Errorf("%w: batch %q", errRefused, s)
			continue
		}
		if key, _, ok := strings.Cut(s, ":"); ok {
			if j := slices.IndexFunc(l.recs, func(r rec) bool { return strings.HasPrefix(r.Batch, key+":") }); j >= 0 {
				out[i] = BatchResult{Base: l.recs[j].Base, Duplicate: true}
				continue
			}
		}
		out[i].Base = l.next
		l.recs = append(l.recs, rec{Base: l.next, Term: term, Batch: s})
		l.next += records(b)
	}
	return out, nil
}

func (l *fakeLog) Checkpoint() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkpoints++
	l.durable = slices.Clone(l.recs)
	return binary.BigEndian.AppendUint64(nil, uint64(l.next)), nil
}

func (l *fakeLog) Restore(cp []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cp == nil {
		if len(l.recs) > 0 {
			l.cuts++
		}
		l.recs, l.next = nil, 0
		return nil
	}
	l.restores++
	if len(cp) != 8 {
		return fmt.Errorf("fake: checkpoint of %d bytes", len(cp))
	}
	hw := int64(binary.BigEndian.Uint64(cp))
	if hw > l.next {
		l.refusals++
		return fmt.Errorf("fake: checkpoint at %d past the log's end %d", hw, l.next)
	}
	i := slices.IndexFunc(l.recs, func(r rec) bool { return r.Base >= hw })
	if i < 0 {
		i = len(l.recs)
	}
	if i < len(l.recs) && l.recs[i].Base != hw {
		l.refusals++
		return fmt.Errorf("fake: checkpoint at %d inside a batch", hw)
	}
	if i < len(l.recs) {
		l.cuts++
	}
	l.recs, l.next = l.recs[:i], hw
	return nil
}

// crash drops everything applied since the last Checkpoint.
func (l *fakeLog) crash() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = slices.Clone(l.durable)
	l.next = 0
	if n := len(l.recs); n > 0 {
		l.next = l.recs[n-1].Base + records([]byte(l.recs[n-1].Batch))
	}
}

func (l *fakeLog) snapshot() []rec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}
