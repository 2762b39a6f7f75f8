package client_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// Concurrent publishes to a topic over one stream each get a distinct
// offset, and the log holds exactly what was answered, in each
// publisher's order, each record at the offset it was answered with:
// sent as records, or as record batches built here (RecordBatches).
func TestPublisherTopicEndToEnd(t *testing.T) {
	for _, batches := range []bool{false, true} {
		t.Run(fmt.Sprintf("batches=%v", batches), func(t *testing.T) { publishTopicEndToEnd(t, batches) })
	}
}

func publishTopicEndToEnd(t *testing.T, batches bool) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "ev", nil); err != nil {
		t.Fatal(err)
	}
	p := c.TopicPublisher("ev", &client.PublisherOptions{MaxBatch: 50, MaxInFlight: 4, RecordBatches: batches})
	const senders, each = 8, 100
	offsets := make([][]int64, senders)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			var fs []*client.PublishFuture
			for i := range each {
				f, err := p.PublishRecord(ctx, &client.ProduceRecord{Value: fmt.Appendf(nil, "%d-%d", s, i)})
				if err != nil {
					t.Error(err)
					return
				}
				fs = append(fs, f)
			}
			for _, f := range fs {
				r, err := f.Wait(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				offsets[s] = append(offsets[s], r.GetRecord().GetOffset())
			}
		})
	}
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for s, offs := range offsets {
		for i, o := range offs {
			if _, ok := seen[o]; ok {
				t.Fatalf("offset %d answered twice", o)
			}
			seen[o] = fmt.Sprintf("%d-%d", s, i)
			if i > 0 && o <= offs[i-1] {
				t.Errorf("sender %d: offset %d after %d: a sender's order is not kept", s, o, offs[i-1])
			}
		}
	}
	f, err := c.Fetch(ctx, &client.FetchRequest{Topic: "ev", MaxRecords: 2000, Partitions: []*client.PartitionOffset{{Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	recs := f.GetPartitions()[0].GetRecords()
	if len(recs) != senders*each || len(seen) != senders*each {
		t.Fatalf("log has %d records, %d answered; want %d", len(recs), len(seen), senders*each)
	}
	for _, r := range recs {
		if want := seen[r.GetOffset()]; string(r.GetValue()) != want {
			t.Fatalf("offset %d holds %q, answered for %q", r.GetOffset(), r.GetValue(), want)
		}
	}
	if _, err := p.PublishRecord(ctx, &client.ProduceRecord{}); err == nil {
		t.Error("publish after Close succeeded")
	}
}

// With RecordBatches, a record's headers and timestamp reach the log as
// they were published, and a keyed record still goes to its key's
// partition (its request goes as records).
func TestPublisherRecordBatchesKeepFields(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "ev", &client.TopicConfig{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	p := c.TopicPublisher("ev", &client.PublisherOptions{RecordBatches: true, Linger: -1})
	at := time.UnixMilli(1_700_000_000_123)
	f, err := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("v"), Timestamp: timestamppb.New(at),
		Headers: []*client.Header{{Key: "h", Value: []byte("hv")}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := c.Fetch(ctx, &client.FetchRequest{Topic: "ev", MaxRecords: 10,
		Partitions: []*client.PartitionOffset{{Partition: r.GetRecord().GetPartition(), Offset: r.GetRecord().GetOffset()}}})
	if err != nil {
		t.Fatal(err)
	}
	got := fr.GetPartitions()[0].GetRecords()
	if len(got) == 0 || !got[0].GetTimestamp().AsTime().Equal(at) || len(got[0].GetHeaders()) != 1 ||
		got[0].GetHeaders()[0].GetKey() != "h" || string(got[0].GetHeaders()[0].GetValue()) != "hv" {
		t.Fatalf("stored %v, want value v at %v with header h=hv", got, at)
	}
	keyed, err := p.PublishRecord(ctx, &client.ProduceRecord{Key: []byte("k"), Value: []byte("kv")})
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keyed.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	one, err := c.Produce(ctx, "ev", []*client.ProduceRecord{{Key: []byte("k"), Value: []byte("kv2")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := one[0].GetPartition(); kr.GetRecord().GetPartition() != want {
		t.Errorf("keyed record went to partition %d, the key's is %d", kr.GetRecord().GetPartition(), want)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A queue publisher's messages arrive; an entry over the queue's limit is
// refused by itself (MESSAGE_TOO_LARGE) and its neighbours are stored; a
// queue that does not exist fails each entry with ErrQueueNotFound.
func TestPublisherQueueErrorsPerEntry(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "jobs", &client.QueueConfig{MaxMessageBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	p := c.QueuePublisher("jobs", &client.PublisherOptions{Linger: 50 * time.Millisecond})
	defer p.Close(ctx)
	bodies := [][]byte{[]byte("a"), make([]byte, 2048), []byte("c")}
	var fs []*client.PublishFuture
	for _, b := range bodies {
		f, err := p.PublishMessage(ctx, client.Entry(b))
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	for i, f := range fs {
		r, err := f.Wait(ctx)
		switch {
		case i == 1 && !errors.Is(err, client.ErrMessageTooLarge):
			t.Errorf("oversized entry: %v, want ErrMessageTooLarge", err)
		case i != 1 && (err != nil || r.GetMessage().GetMessageId() == ""):
			t.Errorf("entry %d: %v, %v", i, r, err)
		}
	}
	st, err := c.GetQueue(ctx, "jobs")
	if err != nil || st.GetStats().GetVisible() != 2 {
		t.Errorf("queue holds %v (%v), want 2 visible", st.GetStats(), err)
	}
	missing := c.QueuePublisher("nope", nil)
	defer missing.Close(ctx)
	f, err := missing.PublishMessage(ctx, client.Entry([]byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(ctx); !errors.Is(err, client.ErrQueueNotFound) {
		t.Errorf("unknown queue: %v, want ErrQueueNotFound", err)
	}
}

// Acks on the Consume stream are durable when answered: acked messages are
// gone from the queue, and the stream keeps delivering past its prefetch.
func TestConsumeAckedEndToEnd(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		if _, err := c.Send(ctx, "q", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := c.ConsumeAcked(ctx, "q", client.MaxMessages(4), client.Visibility(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]bool{}
	for len(got) < n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d: %v", len(got), err)
		}
		got[string(m.GetBody())] = true
		errs, err := cons.Ack(ctx, m.GetReceipt())
		if err != nil || len(errs) != 1 || errs[0] != nil {
			t.Fatalf("ack: %v, %v", errs, err)
		}
	}
	errs, err := cons.Ack(ctx, "not-a-receipt")
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], client.ErrReceiptInvalid) {
		t.Errorf("bad receipt: %v, %v; want ErrReceiptInvalid", errs, err)
	}
	q, err := c.GetQueue(ctx, "q")
	if err != nil || q.GetStats().GetVisible()+q.GetStats().GetInFlight() != 0 {
		t.Errorf("queue after acks: %v, %v; want empty", q.GetStats(), err)
	}
}
