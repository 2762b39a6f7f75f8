package queue

import (
	"bytes"
	"testing"

	"github.com/sluice-mq/sluice/internal/testrace"
)

// TestModel runs random operation sequences against the cursor and the reference model.
func TestModel(t *testing.T) {
	testrace.NotUnderRace(t)
	seeds, ops := 200, 3000
	if testing.Short() {
		seeds = 40
	}
	total := map[string]int{}
	for seed := range int64(seeds) {
		h := newHarness(t, seed)
		for range ops {
			h.step()
		}
		for k, v := range h.stats {
			total[k] += v
		}
	}
	t.Logf("%d seeds x %d ops: %v", seeds, ops, total)
	for _, k := range []string{"delivered", "deadLettered", "ack", "ack refused", "nack", "nack refused",
		"extend", "extend refused", "crash full", "crash snapshot", "purge", "malformed"} {
		if total[k] == 0 {
			t.Errorf("no %q happened: the generator does not reach it", k)
		}
	}
}

// TestCaptureSnapshotIsTheStateAtCapture: captures taken at random points of the model's
// random runs, encoded only later (after more receives, acks, nacks, crashes), are byte for
// byte the Snapshot taken at their capture. The broker encodes a capture off the queue's
// lock while the cursor goes on, so nothing the encoding reads may be the cursor's own.
func TestCaptureSnapshotIsTheStateAtCapture(t *testing.T) {
	type captured struct {
		captured *CapturedSnapshot
		want     []byte
	}
	compared := 0
	for seed := range int64(20) {
		h := newHarness(t, seed)
		var pending []captured
		for i := range 1500 {
			h.step()
			if h.rng.Intn(20) == 0 {
				pending = append(pending, captured{h.c.CaptureSnapshot(), h.c.Snapshot()})
			}
			if len(pending) > 0 && (h.rng.Intn(30) == 0 || i == 1499) {
				for _, p := range pending {
					got := p.captured.Encode()
					if !bytes.Equal(got, p.want) {
						t.Fatalf("seed %d: a capture encoded later differs from the snapshot at its capture:\n got  %x\n want %x", seed, got, p.want)
					}
					if len(got) > p.captured.Size() {
						t.Fatalf("seed %d: encoded %d bytes, more than its Size %d", seed, len(got), p.captured.Size())
					}
					compared++
				}
				pending = pending[:0]
			}
		}
	}
	if compared < 100 {
		t.Fatalf("only %d captures compared", compared)
	}
}
