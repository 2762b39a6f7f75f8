package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// idempotentBatch is one record of producer pid at sequence seq, for ProduceBatches.
func idempotentBatch(t *testing.T, pid ProducerID, seq int32, now time.Time) []byte {
	t.Helper()
	raw, err := batch.Build([]batch.Record{{Timestamp: now.UnixMilli(), Value: []byte("v")}},
		batch.Options{Producer: &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: seq}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestIdleProducerForgotten: on a single node, a partition forgets an idempotent producer
// that wrote nothing to it for Kafka's producer.id.expiration (24 h by default), counted
// by the maintenance passes, and keeps one that wrote since; the one forgotten is accepted
// again whatever its sequence. Producers loaded at a restart count from the first pass
// after it.
func TestIdleProducerForgotten(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.b.CreateTopic(TopicSettings{Name: "p", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	a, _ := e.b.InitProducerID("")
	b, _ := e.b.InitProducerID("")
	produce := func(pid ProducerID, seq int32) {
		t.Helper()
		if _, err := e.b.ProduceBatches(ctx, "p", 0, [][]byte{idempotentBatch(t, pid, seq, e.clock.Now())}); err != nil {
			t.Fatalf("producer %d sequence %d: %v", pid.ID, seq, err)
		}
	}
	remembered := func(when string, want ...ProducerID) {
		t.Helper()
		ps, err := e.b.PartitionProducers("p", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got, wanted []int64
		for _, p := range ps {
			got = append(got, p.ID)
		}
		for _, p := range want {
			wanted = append(wanted, p.ID)
		}
		if !slices.Equal(got, wanted) {
			t.Fatalf("%s: producers %v remembered, want %v", when, got, wanted)
		}
		if st := e.b.ProducerStats(); st.Remembered != int64(len(want)) {
			t.Fatalf("%s: ProducerStats says %d remembered, want %d", when, st.Remembered, len(want))
		}
	}
	expired := func(when string, want uint64) {
		t.Helper()
		if got := e.b.ProducerStats().Expired; got != want {
			t.Fatalf("%s: ProducerStats says %d expired since start, want %d", when, got, want)
		}
	}
	produce(a, 0)
	produce(b, 0)
	e.b.Maintain() // the first pass: both count from now
	e.clock.Advance(12 * time.Hour)
	e.b.Maintain()
	produce(b, 1)
	e.clock.Advance(11*time.Hour + 59*time.Minute)
	e.b.Maintain()
	remembered("23:59 after a's last batch", a, b)
	e.clock.Advance(2 * time.Hour)
	e.b.Maintain()
	remembered("25:59 after a's last batch, 13:59 after b's", b)
	expired("a forgotten", 1)
	produce(a, 5) // forgotten: any sequence is accepted, as by Kafka after the expiry
	remembered("a back", a, b)

	e.restart() // loaded from the snapshot: both count from the next pass
	e.b.Maintain()
	e.clock.Advance(23 * time.Hour)
	e.b.Maintain()
	remembered("23 h after the restart's pass", a, b)
	e.clock.Advance(2 * time.Hour)
	e.b.Maintain()
	remembered("25 h after the restart's pass")
	expired("both forgotten after the restart", 2)
}
