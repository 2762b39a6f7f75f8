package client_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// Concurrent publishes to a topic over one stream each get a distinct
// offset, and the log holds exactly what was answered, in each
// publisher's order.
func TestPublisherTopicEndToEnd(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "ev", nil); err != nil {
		t.Fatal(err)
	}
	p := c.TopicPublisher("ev", &client.PublisherOptions{MaxBatch: 50, MaxInFlight: 4})
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
	seen := map[int64]bool{}
	for s, offs := range offsets {
		for i, o := range offs {
			if seen[o] {
				t.Fatalf("offset %d answered twice", o)
			}
			seen[o] = true
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
	if _, err := p.PublishRecord(ctx, &client.ProduceRecord{}); err == nil {
		t.Error("publish after Close succeeded")
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
