package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFranzProduceConsume(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("t", 3)
	cl := n.client(kgo.DefaultProduceTopic("t"))
	ctx := testCtx(t, 30*time.Second)
	const count = 1000
	var recs []*kgo.Record
	for i := range count {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%17), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := n.client(kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < count {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if got != count {
		t.Fatalf("got %d records, want %d", got, count)
	}
}
