package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/producer"
)

func (e *env) produceRaw(topic string, p int32, raw []byte) (ProduceBatchesResult, error) {
	return e.b.ProduceBatches(context.Background(), topic, p, [][]byte{raw})
}

func TestProducerIdempotentRetryFenceGapRestart(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("idem", 2)
	pid, err := e.b.InitProducerID("")
	if err != nil {
		t.Fatal(err)
	}
	prod := func(seq int32) *batch.Producer {
		return &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: seq}
	}
	first := buildBatch(t, prod(0), "a", "b", "c")
	r1, err := e.produceRaw("idem", 0, first)
	if err != nil || r1.BaseOffsets[0] != 0 || r1.Duplicate[0] {
		t.Fatalf("first: %+v %v", r1, err)
	}
	second := buildBatch(t, prod(3), "d")
	if r, err := e.produceRaw("idem", 0, second); err != nil || r.BaseOffsets[0] != 3 {
		t.Fatalf("second: %+v %v", r, err)
	}
	// A retry of the first batch gets its original offset and is not stored again.
	if r, err := e.produceRaw("idem", 0, first); err != nil || r.BaseOffsets[0] != 0 || !r.Duplicate[0] {
		t.Fatalf("retry: %+v %v", r, err)
	}
	// A gap is refused and stores nothing.
	if _, err := e.produceRaw("idem", 0, buildBatch(t, prod(9), "x")); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if hw := e.hw("idem", 0); hw != 4 {
		t.Fatalf("high watermark %d, want 4", hw)
	}
	// Sequences are per partition: partition 1 starts at 0.
	if _, err := e.produceRaw("idem", 1, buildBatch(t, prod(0), "p1")); err != nil {
		t.Fatal(err)
	}
	// The native record API stamps batches the same way.
	recs := []ProduceRecord{{Value: []byte("e")}}
	opts := ProduceOptions{Idempotence: &Idempotence{Producer: pid, BaseSequence: 4}}
	for range 2 {
		res, err := e.b.Produce(context.Background(), "idem", withPartition(recs, 0), opts)
		if err != nil || res[0].Offset != 4 {
			t.Fatalf("native idempotent produce: %+v %v", res, err)
		}
	}

	// Producer state survives a restart (rebuilt from the log's tail) and a power cut.
	e.crash()
	if r, err := e.produceRaw("idem", 0, second); err != nil || r.BaseOffsets[0] != 3 || !r.Duplicate[0] {
		t.Fatalf("retry after crash: %+v %v", r, err)
	}
	if _, err := e.produceRaw("idem", 0, buildBatch(t, prod(6), "x")); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after crash: %v", err)
	}
	if r, err := e.produceRaw("idem", 0, buildBatch(t, prod(5), "f")); err != nil || r.BaseOffsets[0] != 5 {
		t.Fatalf("next after crash: %+v %v", r, err)
	}
	if hw := e.hw("idem", 0); hw != 6 {
		t.Fatalf("high watermark %d, want 6", hw)
	}
}

func withPartition(recs []ProduceRecord, p int32) []ProduceRecord {
	out := append([]ProduceRecord(nil), recs...)
	for i := range out {
		out[i].Partition = &p
	}
	return out
}

func TestProducerZombieFenced(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("fence", 1)
	old, err := e.b.InitProducerID("payments")
	if err != nil {
		t.Fatal(err)
	}
	zombie := func(seq int32) []byte {
		return buildBatch(t, &batch.Producer{ID: old.ID, Epoch: old.Epoch, BaseSequence: seq}, "z")
	}
	if _, err := e.produceRaw("fence", 0, zombie(0)); err != nil {
		t.Fatal(err)
	}
	e.restart()
	cur, err := e.b.InitProducerID("payments")
	if err != nil || cur.ID != old.ID || cur.Epoch != old.Epoch+1 {
		t.Fatalf("re-init: %+v %v (old %+v)", cur, err, old)
	}
	// The old instance is fenced even before the new one wrote here.
	if _, err := e.produceRaw("fence", 0, zombie(1)); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie: %v", err)
	}
	fresh := buildBatch(t, &batch.Producer{ID: cur.ID, Epoch: cur.Epoch, BaseSequence: 0}, "n")
	if _, err := e.produceRaw("fence", 0, fresh); err != nil {
		t.Fatalf("new epoch: %v", err)
	}
	if _, err := e.produceRaw("fence", 0, zombie(1)); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie after new epoch wrote: %v", err)
	}
	unknown := buildBatch(t, &batch.Producer{ID: 1 << 40, BaseSequence: 0}, "u")
	if _, err := e.produceRaw("fence", 0, unknown); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("unknown producer: %v", err)
	}
	if hw := e.hw("fence", 0); hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
	other, _ := e.b.InitProducerID("")
	if other.ID == cur.ID {
		t.Fatal("producer id reused")
	}
}

// TestProducerStateSnapshot: a retry is recognised after a restart even
// when the partition grew far past the tail the broker scans without a
// snapshot: at a clean close, and after a power cut once Maintain wrote one.
func TestProducerStateSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("busy", 1)
	pid, _ := e.b.InitProducerID("")
	idem := buildBatch(t, &batch.Producer{ID: pid.ID, Epoch: pid.Epoch}, "once")
	if _, err := e.produceRaw("busy", 0, idem); err != nil {
		t.Fatal(err)
	}
	bulk := make([]ProduceRecord, producer.ScanOffsets+100)
	for i := range bulk {
		bulk[i] = ProduceRecord{Value: []byte("x")}
	}
	e.produce("busy", bulk...)
	retry := func(when string) {
		t.Helper()
		if r, err := e.produceRaw("busy", 0, idem); err != nil || !r.Duplicate[0] || r.BaseOffsets[0] != 0 {
			t.Fatalf("retry %s: %+v %v", when, r, err)
		}
	}
	e.restart()
	retry("after a clean restart")
	e.produce("busy", bulk...)
	e.b.Maintain()
	e.produce("busy", kv("", "after the snapshot"))
	e.crash()
	retry("after a power cut")
	if _, err := e.produceRaw("busy", 0, buildBatch(t, &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: 5}, "gap")); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after a power cut: %v", err)
	}
}
