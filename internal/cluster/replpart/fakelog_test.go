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
	start       int64 // the log start offset (retention, or a range pulled from above the end)
	next        int64
	durable     []rec
	durStart    int64
	checkpoints int
	restores    int // Restore calls with a checkpoint (not nil)
	cuts        int // Restore calls that cut batches the log held (it had applied past the checkpoint)
	refusals    int // Restore calls refused: the group stopped here
	behind      int // Restore calls that found the log behind the checkpoint (a pull followed)
	pulled      int // batches appended by AppendRange
	failRange   error
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
	l.durable, l.durStart = slices.Clone(l.recs), l.start
	cp := binary.BigEndian.AppendUint64(nil, uint64(l.next))
	return binary.BigEndian.AppendUint64(cp, uint64(l.start)), nil
}

func (l *fakeLog) Restore(cp []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cp == nil {
		if len(l.recs) > 0 {
			l.cuts++
		}
		l.recs, l.next, l.start = nil, 0, 0
		return nil
	}
	l.restores++
	if len(cp) != 16 {
		return fmt.Errorf("fake: checkpoint of %d bytes", len(cp))
	}
	hw, start := int64(binary.BigEndian.Uint64(cp)), int64(binary.BigEndian.Uint64(cp[8:]))
	if l.next < start { // as the broker's: below the checkpoint's log start, restart there
		l.recs, l.start, l.next = nil, start, start
	}
	if hw > l.next {
		l.behind++
		return &BehindError{From: l.next, To: hw}
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
	if l.start > hw {
		l.start = hw
	}
	return nil
}

func (l *fakeLog) Lacks(cp []byte) (int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(cp) != 16 {
		return 0, 0, fmt.Errorf("fake: checkpoint of %d bytes", len(cp))
	}
	return l.next, int64(binary.BigEndian.Uint64(cp)), nil
}

// ReadRange encodes records as {base, term, len uvarint, batch}.
func (l *fakeLog) ReadRange(from, to int64, maxBytes int) (Range, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failRange != nil {
		return Range{}, l.failRange
	}
	r := Range{Start: max(from, l.start)}
	if r.Start >= to {
		r.Start = to
	}
	r.Next = r.Start
	for _, x := range l.recs {
		if x.Base < r.Start {
			continue
		}
		if x.Base != r.Next || x.Base >= to || (len(r.Data) > 0 && len(r.Data)+len(x.Batch) > maxBytes) {
			break
		}
		r.Data = binary.AppendUvarint(r.Data, uint64(x.Base))
		r.Data = binary.AppendUvarint(r.Data, x.Term)
		r.Data = binary.AppendUvarint(r.Data, uint64(len(x.Batch)))
		r.Data = append(r.Data, x.Batch...)
		r.Next = x.Base + records([]byte(x.Batch))
	}
	if r.Next > to {
		return Range{}, fmt.Errorf("fake: a batch crosses offset %d", to)
	}
	return r, nil
}

func (l *fakeLog) AppendRange(at int64, r Range) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if at < l.next {
		return fmt.Errorf("fake: append range at %d, log ends at %d", at, l.next)
	}
	if r.Start > l.next {
		l.recs, l.start, l.next = nil, r.Start, r.Start // as storage.Log.Reset
	}
	b := r.Data
	for len(b) > 0 {
		var v [3]uint64
		for i := range v {
			x, n := binary.Uvarint(b)
			if n <= 0 {
				return errors.New("fake: bad range")
			}
			v[i], b = x, b[n:]
		}
		if v[2] > uint64(len(b)) || int64(v[0]) != l.next {
			return fmt.Errorf("fake: range record at %d, log ends at %d", v[0], l.next)
		}
		x := rec{Base: int64(v[0]), Term: v[1], Batch: string(b[:v[2]])}
		b = b[v[2]:]
		l.recs = append(l.recs, x)
		l.next = x.Base + records([]byte(x.Batch))
		l.pulled++
	}
	if l.next != r.Next {
		return fmt.Errorf("fake: range ends at %d, said %d", l.next, r.Next)
	}
	return nil
}

// deleteBelow is retention: the batches wholly below off go, and the log starts at off.
func (l *fakeLog) deleteBelow(off int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.recs, func(r rec) bool { return r.Base >= off })
	if i < 0 {
		i = len(l.recs)
	}
	l.recs = slices.Clone(l.recs[i:])
	l.start = max(l.start, off)
}

// crash drops everything applied since the last Checkpoint.
func (l *fakeLog) crash() { l.crashKeeping(0) }

// crashKeeping is a power cut after which the disk still holds the first n batches applied
// past the last Checkpoint, as the broker's log may: its unsynced appends reach the disk
// in order whenever the kernel writes them back, and its recovery keeps the prefix whose
// checksums hold. Only appends past the durable copy are kept (a log cut or pulled since
// falls back to the copy).
func (l *fakeLog) crashKeeping(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := slices.Clone(l.durable)
	if d := len(l.durable); n > 0 && l.start == l.durStart && len(l.recs) > d && slices.Equal(l.recs[:d], l.durable) {
		kept = append(kept, l.recs[d:min(len(l.recs), d+n)]...)
	}
	l.recs, l.start = kept, l.durStart
	l.next = l.start
	if n := len(l.recs); n > 0 {
		l.next = l.recs[n-1].Base + records([]byte(l.recs[n-1].Batch))
	}
}

func (l *fakeLog) snapshot() []rec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// Bounds and Records make the fake a RecordLog: a batch's records sit at Base, Base+1, …;
// a "key:…" batch's records have that key, the others none; timestamps are 0 (never
// expired).
func (l *fakeLog) Bounds() (int64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start, l.next
}

func (l *fakeLog) Records(from int64, maxRecs int) ([]RecordMeta, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []RecordMeta
	next := from
	for _, x := range l.recs {
		n := records([]byte(x.Batch))
		if x.Base+n <= from {
			continue
		}
		if len(out) >= maxRecs {
			break
		}
		key, _, hasKey := strings.Cut(x.Batch, ":")
		for off := max(x.Base, from); off < x.Base+n && len(out) < maxRecs; off++ {
			out = append(out, RecordMeta{Offset: off, Key: []byte(key), HasKey: hasKey})
			next = off + 1
		}
	}
	return out, next, nil
}

// capturingLog is the fake log as a CheckpointCapturer: the checkpoint as of the capture,
// its durable copy taken by persist, later (of everything applied by then).
type capturingLog struct{ *fakeLog }

func (l capturingLog) CaptureCheckpoint() ([]byte, func() error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkpoints++
	cp := binary.BigEndian.AppendUint64(nil, uint64(l.next))
	cp = binary.BigEndian.AppendUint64(cp, uint64(l.start))
	return cp, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.durable, l.durStart = slices.Clone(l.recs), l.start
		return nil
	}, nil
}
