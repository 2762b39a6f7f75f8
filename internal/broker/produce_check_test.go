package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
)

// TestDamagedIdempotentBatchRefusedAsCorrupt: a batch is validated before
// the idempotent-producer checks read its header, so damage is answered as
// ErrCorruptBatch (Kafka's CORRUPT_MESSAGE, which a client retries) and
// never as a duplicate, a sequence gap or an unknown producer judged from
// damaged bytes; nothing is stored. This is why the one check is made by
// storage.Log.Check before ProduceBatches decides anything, rather than
// inside the append that follows (docs/architecture.md).
func TestDamagedIdempotentBatchRefusedAsCorrupt(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("idem", 1)
	pid, err := e.b.InitProducerID("")
	if err != nil {
		t.Fatal(err)
	}
	first := buildBatch(t, &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: 0}, "a", "b")
	if _, err := e.produceRaw("idem", 0, first); err != nil {
		t.Fatal(err)
	}
	damage := func(at int, v byte) []byte {
		b := bytes.Clone(first)
		b[at] ^= v
		return b
	}
	gap := bytes.Clone(first) // sequence 7 (a gap), CRC left stale
	binary.BigEndian.PutUint32(gap[53:], 7)
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"retry-with-damaged-record", damage(len(first)-1, 1)}, // would be a duplicate
		{"damaged-producer-id", damage(43+7, 0x40)},            // would be an unknown producer
		{"damaged-sequence", gap},                              // would be out of order
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.produceRaw("idem", 0, tc.raw)
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("got %+v, %v; want ErrCorruptBatch", res, err)
			}
			if hw := e.hw("idem", 0); hw != 2 {
				t.Fatalf("high watermark %d, want 2: a refused batch was stored", hw)
			}
		})
	}
}

// TestBatchWithOffsetGapIsCorrupt: a batch claiming more offsets than it
// has records (lastOffsetDelta past recordCount-1, as compaction leaves
// them) passes batch.Validate but not the log's check; it is refused as
// ErrCorruptBatch (CORRUPT_MESSAGE), not as an untyped storage error that
// a front-end can only call an unknown server error.
func TestBatchWithOffsetGapIsCorrupt(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 1)
	raw := buildBatch(t, nil, "a", "b")
	binary.BigEndian.PutUint32(raw[23:], 5) // lastOffsetDelta 5 for 2 records
	binary.BigEndian.PutUint32(raw[17:], batch.ComputeCRC(raw))
	if err := batch.Validate(raw, 0); err != nil {
		t.Fatalf("the batch should pass batch.Validate: %v", err)
	}
	if _, err := e.produceRaw("t", 0, raw); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("got %v, want ErrCorruptBatch", err)
	}
	if hw := e.hw("t", 0); hw != 0 {
		t.Fatalf("high watermark %d: the batch was stored", hw)
	}
}
