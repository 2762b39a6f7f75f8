package producer

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
)

func hdr(id int64, epoch int16, seq, n int32) batch.Header {
	return batch.Header{ProducerID: id, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: n - 1}
}

// The sequence rules, one step after another on one partition's state.
func TestSequenceRules(t *testing.T) {
	var ps State
	steps := []struct {
		name string
		h    batch.Header
		dup  bool
		err  error
	}{
		{"first batch", hdr(7, 0, 0, 3), false, nil},
		{"the next", hdr(7, 0, 3, 2), false, nil},
		{"a retry of the first", hdr(7, 0, 0, 3), true, nil},
		{"a gap", hdr(7, 0, 9, 1), false, ErrOutOfOrderSequence},
		{"an older epoch", hdr(7, -1, 5, 1), false, ErrFenced},
		{"a new epoch not at 0", hdr(7, 1, 5, 1), false, ErrOutOfOrderSequence},
		{"a new epoch at 0", hdr(7, 1, 0, 1), false, nil},
		{"another producer", hdr(8, 0, 42, 1), false, nil},
	}
	base := int64(0)
	for _, s := range steps {
		ps.Lock()
		dup, err := ps.CheckLocked(s.h)
		if (dup != nil) != s.dup || !errors.Is(err, s.err) {
			ps.Unlock()
			t.Fatalf("%s: dup %v err %v, want dup %v err %v", s.name, dup, err, s.dup, s.err)
		}
		if dup == nil && err == nil {
			ps.RecordLocked(s.h, base)
			base += int64(s.h.LastOffsetDelta) + 1
		}
		ps.Unlock()
	}
	ps.Expire(base) // every kept batch is below the new log start
	ps.Lock()
	defer ps.Unlock()
	if dup, err := ps.CheckLocked(hdr(7, 1, 99, 1)); dup != nil || err != nil {
		t.Fatalf("after expiry a producer is forgotten: %v %v", dup, err)
	}
}
