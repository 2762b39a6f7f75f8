package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// FuzzProduceBatches feeds arbitrary bytes as a client's batch: the broker
// stores it only if it is a valid batch, refuses it with a typed error
// otherwise, and never panics.
func FuzzProduceBatches(f *testing.F) {
	good, _ := batch.Build([]batch.Record{{Timestamp: 1, Key: []byte("k"), Value: []byte("v")}}, batch.Options{})
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte{})
	idem, _ := batch.Build([]batch.Record{{Value: []byte("v")}}, batch.Options{Producer: &batch.Producer{ID: 0, BaseSequence: 0}})
	f.Add(idem)
	clock := newClock()
	b, err := Open(Options{Dir: "/f", FS: vfs.NewMem(), Now: clock.Now, Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(TopicSettings{Name: "t"}); err != nil {
		f.Fatal(err)
	}
	if _, err := b.InitProducerID(""); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before, _ := b.ListOffsets("t", 0, OffsetLatest)
		_, err := b.ProduceBatches(context.Background(), "t", 0, [][]byte{data})
		after, _ := b.ListOffsets("t", 0, OffsetLatest)
		if err != nil && after.Offset != before.Offset {
			t.Fatalf("refused batch (%v) stored records: %d -> %d", err, before.Offset, after.Offset)
		}
		if err == nil && batch.Validate(data, 0) != nil {
			t.Fatal("an invalid batch was stored")
		}
		res, err := b.Fetch(context.Background(), "t", 0, before.Offset, FetchOptions{MaxWait: time.Millisecond})
		if err != nil {
			t.Fatalf("fetch after produce: %v", err)
		}
		if after.Offset > before.Offset && len(res.Batches) == 0 {
			t.Fatal("stored batch not fetchable")
		}
	})
}
