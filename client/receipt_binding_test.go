package client_test

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// Over the native API, a receipt of one queue is RECEIPT_INVALID on
// another and acks nothing there (receipts used to be the same for the
// same message index of every queue).
func TestReceiptOfAnotherQueueIsInvalid(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	for _, q := range []string{"a", "b"} {
		mustCreate(t, c, q, nil)
		if _, err := c.Send(t.Context(), q, []byte("job")); err != nil {
			t.Fatal(err)
		}
	}
	ma, mb := receiveOne(t, c, "a"), receiveOne(t, c, "b")
	if err := c.Ack(t.Context(), "b", ma.GetReceipt()); !errors.Is(err, client.ErrReceiptInvalid) {
		t.Fatalf("ack of a's receipt on b = %v, want ErrReceiptInvalid", err)
	}
	for q, m := range map[string]*client.Message{"a": ma, "b": mb} {
		if err := c.Ack(t.Context(), q, m.GetReceipt()); err != nil {
			t.Fatalf("ack of %s's own receipt: %v", q, err)
		}
	}
}
