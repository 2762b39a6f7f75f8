package broker

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
)

// TestPlaceBatches: placed batches take offsets in call order and answer
// once durable; -1 picks a partition; an idempotent batch is deduplicated
// as ProduceBatches does; transactional and control batches, a damaged
// batch and an unknown partition are refused with nothing written.
func TestPlaceBatches(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("pb", 2)
	ctx := context.Background()
	place := func(partition int32, raws ...[]byte) (*PlacedBatches, error) {
		return e.b.PlaceBatches(ctx, "pb", partition, raws)
	}
	first, err := place(0, buildBatch(t, nil, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := place(0, buildBatch(t, nil, "c"), buildBatch(t, nil, "d", "e"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := second.Wait(ctx); err != nil || !slices.Equal(b, []int64{2, 3}) {
		t.Fatalf("second: %v %v, want bases 2 and 3", b, err)
	}
	if b, err := first.Wait(ctx); err != nil || !slices.Equal(b, []int64{0}) || first.Partition != 0 {
		t.Fatalf("first: %v %v partition %d", b, err, first.Partition)
	}
	spread, err := place(-1, buildBatch(t, nil, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spread.Wait(ctx); err != nil || spread.Partition < 0 || spread.Partition > 1 {
		t.Fatalf("partition -1 went to %d: %v", spread.Partition, err)
	}
	pid, err := e.b.InitProducerID("")
	if err != nil {
		t.Fatal(err)
	}
	idem := buildBatch(t, &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: 0}, "g")
	for try := range 2 {
		p, err := place(1, idem)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := p.Wait(ctx); err != nil || len(b) != 1 {
			t.Fatalf("idempotent try %d: %v %v", try, b, err)
		}
	}
	damaged := slices.Clone(buildBatch(t, nil, "x"))
	damaged[len(damaged)-1] ^= 1
	txn, err := batch.Build([]batch.Record{{Value: []byte("t")}}, batch.Options{Producer: &batch.Producer{ID: pid.ID, Epoch: pid.Epoch}, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	marker, err := batch.BuildMarker(pid.ID, pid.Epoch, true, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		partition int32
		raw       []byte
		want      error // nil: an *InvalidArgumentError
	}{
		{"damaged", 0, damaged, ErrCorruptBatch},
		{"transactional", 0, txn, nil},
		{"control", 0, marker, ErrControlBatch},
		{"unknown partition", 2, buildBatch(t, nil, "u"), ErrUnknownPartition},
	} {
		_, err := place(tc.partition, tc.raw)
		var inv *InvalidArgumentError
		if tc.want == nil && !errors.As(err, &inv) || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if hw0, hw1 := e.hw("pb", 0), e.hw("pb", 1); hw0+hw1 != 7 {
		t.Fatalf("high watermarks %d + %d, want 7 records (a, b, c, d, e, f, g once)", hw0, hw1)
	}
}
