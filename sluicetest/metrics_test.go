package sluicetest_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// A subscription is a queue cursor, and /metrics counts its acks and its
// refused stale acks as it does a queue's.
func TestMetricsCountSubscriptionAcks(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "events", "audit", nil); err != nil {
		t.Fatal(err)
	}
	recs := []*client.ProduceRecord{{Value: []byte("a")}, {Value: []byte("b")}}
	if _, err := c.Produce(ctx, "events", recs, nil); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Receive(ctx, "events/audit", client.MaxMessages(2))
	if err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %d %v", len(msgs), err)
	}
	for _, m := range msgs {
		if err := c.Ack(ctx, "events/audit", m.GetReceipt()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Ack(ctx, "events/audit", msgs[0].GetReceipt()); !errors.Is(err, client.ErrReceiptStale) {
		t.Fatalf("second ack: %v, want a stale receipt", err)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`sluice_queue_acked_total{queue="events/audit"} 2`,
		`sluice_queue_stale_ack_refused_total{queue="events/audit"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
