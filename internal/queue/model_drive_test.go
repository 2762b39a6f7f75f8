package queue

import (
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
