package client_test

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/sluicetest"
)

// Over the wire, Peek pages through a queue without receiving (the
// message's receive count and the queue's stats do not move), and
// PreviewRedrive counts what StartRedrive then moves.
func TestPeekAndPreviewRedrive(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	mustCreate(t, c, "jobs-dlq", nil)
	mustCreate(t, c, "jobs", &client.QueueConfig{DeadLetter: &client.DeadLetterPolicy{Queue: "jobs-dlq", MaxReceives: 1}})
	for _, b := range []string{"a", "b", "c"} {
		if _, err := c.Send(ctx, "jobs", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.Peek(ctx, "jobs", 0, 2)
	if err != nil || len(page.GetMessages()) != 2 || page.GetNextSequence() != 2 || page.GetEndSequence() != 3 {
		t.Fatalf("first page: %v, %v", page, err)
	}
	page, err = c.Peek(ctx, "jobs", page.GetNextSequence(), 2)
	if err != nil || len(page.GetMessages()) != 1 || string(page.GetMessages()[0].GetMessage().GetBody()) != "c" {
		t.Fatalf("second page: %v, %v", page, err)
	}
	if s := page.GetMessages()[0].GetState(); s != sluicev1.MessageState_MESSAGE_STATE_VISIBLE {
		t.Errorf("state %v", s)
	}
	if q, err := c.GetQueue(ctx, "jobs"); err != nil || q.GetStats().GetReceivedTotal() != 0 {
		t.Fatalf("peek received: %v, %v", q.GetStats(), err)
	}

	m := receiveOne(t, c, "jobs")
	if err := c.Nack(ctx, "jobs", m.GetReceipt(), 0, "bad"); err != nil {
		t.Fatal(err)
	}
	if msgs, err := c.Receive(ctx, "jobs", client.MaxMessages(10)); err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %d %v", len(msgs), err) // a went to the dead-letter queue
	}
	prev, err := c.PreviewRedrive(ctx, &client.PreviewRedriveRequest{DeadLetterQueue: "jobs-dlq"})
	if err != nil || prev.GetCount() != 1 || !prev.GetComplete() || len(prev.GetSample()) != 1 ||
		len(prev.GetDestinations()) != 1 || prev.GetDestinations()[0].GetQueue() != "jobs" {
		t.Fatalf("preview: %v, %v", prev, err)
	}
	if dl := prev.GetSample()[0].GetMessage().GetDeadLetter(); dl.GetSourceQueue() != "jobs" || dl.GetLastNackReason() != "bad" {
		t.Errorf("sample's dead-letter info: %v", dl)
	}
	if _, err := c.Peek(ctx, "jobs", 0, 101); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("max 101: %v", err)
	}
	if _, err := c.Peek(ctx, "nosuch", 0, 0); !errors.Is(err, client.ErrQueueNotFound) {
		t.Errorf("missing queue: %v", err)
	}
	none := int32(0)
	if p, err := c.PreviewRedrive(ctx, &client.PreviewRedriveRequest{DeadLetterQueue: "jobs-dlq", SampleSize: &none}); err != nil || len(p.GetSample()) != 0 || p.GetCount() != 1 {
		t.Errorf("sample_size 0: %v, %v", p, err)
	}
}
