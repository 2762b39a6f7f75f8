package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

func TestQueueRoundTripEveryProtocol(t *testing.T) {
	srv := sluicetest.Start(t)
	for _, tc := range []struct {
		name string
		p    client.Protocol
	}{{"connect", client.ProtocolConnect}, {"json", client.ProtocolConnectJSON}, {"grpc", client.ProtocolGRPC}, {"grpcweb", client.ProtocolGRPCWeb}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			c := client.New(srv.URL, client.WithProtocol(tc.p))
			q := "rt-" + tc.name
			if _, err := c.CreateQueue(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
			res, err := c.Send(ctx, q, []byte("hello"), client.WithAttribute("tenant", "String", []byte("acme")))
			if err != nil || res.GetMessageId() == "" {
				t.Fatalf("send: %v %v", res, err)
			}
			msgs, err := c.Receive(ctx, q, client.MaxMessages(10), client.Wait(time.Second))
			if err != nil || len(msgs) != 1 {
				t.Fatalf("receive: %v, %v", msgs, err)
			}
			m := msgs[0]
			if string(m.GetBody()) != "hello" || string(m.GetAttributes()["tenant"].GetValue()) != "acme" || m.GetReceiveCount() != 1 || m.GetId() != res.GetMessageId() {
				t.Errorf("got %v", m)
			}
			if err := c.Ack(ctx, q, m.GetReceipt()); err != nil {
				t.Fatal(err)
			}
			if err := c.Ack(ctx, q, m.GetReceipt()); !errors.Is(err, client.ErrReceiptStale) {
				t.Errorf("second ack: %v, want ErrReceiptStale", err)
			}
			// The server stream works in every protocol too.
			if _, err := c.Send(ctx, q, []byte("streamed")); err != nil {
				t.Fatal(err)
			}
			for m, err := range c.Consume(ctx, q) {
				if err != nil || string(m.GetBody()) != "streamed" {
					t.Fatalf("consume: %v, %v", m, err)
				}
				if err := c.Ack(ctx, q, m.GetReceipt()); err != nil {
					t.Fatal(err)
				}
				break
			}
			info, err := c.GetQueue(ctx, q)
			if err != nil || info.GetStats().GetAckedTotal() != 2 || info.GetStats().GetStaleAckRefusedTotal() != 1 {
				t.Errorf("stats %v, %v", info.GetStats(), err)
			}
		})
	}
}

func TestErrorsCarryReasons(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "fifo.fifo", &client.QueueConfig{Fifo: true, ContentBasedDeduplication: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueue(ctx, "std", nil); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1<<20+1)
	for _, tc := range []struct {
		name string
		call func() error
		want error
		code connect.Code
	}{
		{"missing queue", func() error { _, err := c.Send(ctx, "nope", []byte("x")); return err }, client.ErrQueueNotFound, connect.CodeNotFound},
		{"bad name", func() error { _, err := c.CreateQueue(ctx, "no spaces", nil); return err }, client.ErrInvalidName, connect.CodeInvalidArgument},
		{"exists", func() error {
			_, err := c.CreateQueue(ctx, "std", &client.QueueConfig{MaxMessageBytes: 10})
			return err
		}, client.ErrQueueAlreadyExists, connect.CodeAlreadyExists},
		{"too large", func() error { _, err := c.Send(ctx, "std", big); return err }, client.ErrMessageTooLarge, connect.CodeInvalidArgument},
		{"group required", func() error { _, err := c.Send(ctx, "fifo.fifo", []byte("x")); return err }, client.ErrGroupIDRequired, connect.CodeInvalidArgument},
		{"group not allowed", func() error { _, err := c.Send(ctx, "std", []byte("x"), client.WithGroupID("g")); return err }, client.ErrGroupIDNotAllowed, connect.CodeInvalidArgument},
		{"delay too long", func() error {
			_, err := c.Send(ctx, "std", []byte("x"), client.WithDelay(5*24*time.Hour))
			return err
		}, client.ErrDelayTooLong, connect.CodeInvalidArgument},
		{"receipt invalid", func() error { return c.Ack(ctx, "std", "garbage") }, client.ErrReceiptInvalid, connect.CodeInvalidArgument},
		{"redrive not found", func() error { _, err := c.GetRedrive(ctx, "nope"); return err }, client.ErrRedriveNotFound, connect.CodeNotFound},
		{"not a dead-letter queue", func() error {
			_, err := c.StartRedrive(ctx, &client.StartRedriveRequest{DeadLetterQueue: "std"})
			return err
		}, client.ErrQueueIsNotDeadLetter, connect.CodeFailedPrecondition},
		{"batch refused whole", func() error {
			_, err := c.SendBatch(ctx, "std", []*client.SendEntry{client.Entry([]byte("ok")), client.Entry([]byte("x"), client.WithGroupID("g"))})
			return err
		}, client.ErrGroupIDNotAllowed, connect.CodeInvalidArgument},
		{"bad receive size", func() error { _, err := c.Receive(ctx, "std", client.MaxMessages(101)); return err }, client.ErrInvalidArgument, connect.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) || connect.CodeOf(err) != tc.code {
				t.Errorf("got %v (code %v), want %v with code %v", err, connect.CodeOf(err), tc.want, tc.code)
			}
		})
	}
	// The refused batch stored nothing.
	q, err := c.GetQueue(ctx, "std")
	if err != nil || q.GetStats().GetSentTotal() != 0 {
		t.Errorf("std after refusals: %v, %v", q.GetStats(), err)
	}
}

func TestDeadLetterAndRedrive(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	mustCreate(t, c, "work-dlq", nil)
	mustCreate(t, c, "work", &client.QueueConfig{DeadLetter: &client.DeadLetterPolicy{Queue: "work-dlq", MaxReceives: 1}})
	if _, err := c.Send(ctx, "work", []byte("poison")); err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, c, "work")
	if err := c.Nack(ctx, "work", m.GetReceipt(), 0, "bad input"); err != nil {
		t.Fatal(err)
	}
	// The second receive moves it to the dead-letter queue instead.
	if msgs, err := c.Receive(ctx, "work"); err != nil || len(msgs) != 0 {
		t.Fatalf("receive after max receives: %v, %v", msgs, err)
	}
	dead := receiveOne(t, c, "work-dlq")
	if dl := dead.GetDeadLetter(); dl.GetSourceQueue() != "work" || dl.GetLastNackReason() != "bad input" {
		t.Errorf("dead letter info %v", dl)
	}
	if err := c.Nack(ctx, "work-dlq", dead.GetReceipt(), 0, ""); err != nil {
		t.Fatal(err)
	}
	srcs, err := c.DeadLetterSources(ctx, "work-dlq")
	if err != nil || len(srcs) != 1 || srcs[0] != "work" {
		t.Errorf("sources %v, %v", srcs, err)
	}
	r, err := c.StartRedrive(ctx, &client.StartRedriveRequest{DeadLetterQueue: "work-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	for r.GetState() == 1 { // RUNNING; bounded by the test timeout
		if r, err = c.GetRedrive(ctx, r.GetId()); err != nil {
			t.Fatal(err)
		}
	}
	if r.GetMoved() != 1 {
		t.Errorf("redrive %v", r)
	}
	back := receiveOne(t, c, "work")
	if string(back.GetBody()) != "poison" || back.GetId() != m.GetId() {
		t.Errorf("redriven %v", back)
	}
	list, err := c.ListRedrives(ctx, "")
	if err != nil || len(list) != 1 {
		t.Errorf("list %v, %v", list, err)
	}
}

func TestConsumeStreamsAndRespectsInFlight(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	mustCreate(t, c, "s", nil)
	for i := range 5 {
		if _, err := c.Send(ctx, "s", []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for m, err := range c.Consume(ctx, "s", client.MaxMessages(2)) {
		if err != nil {
			t.Fatal(err)
		}
		got++
		// Acking frees a lease slot; without it the stream would stop at 2.
		if err := c.Ack(ctx, "s", m.GetReceipt()); err != nil {
			t.Fatal(err)
		}
		if got == 5 {
			break
		}
	}
	q, err := c.GetQueue(ctx, "s")
	if err != nil || q.GetStats().GetAckedTotal() != 5 {
		t.Errorf("after consume: %v, %v", q.GetStats(), err)
	}
}

func TestListQueuesPagesAndUpdate(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	for _, n := range []string{"a1", "a2", "b1"} {
		mustCreate(t, c, n, nil)
	}
	qs, err := c.ListQueues(ctx, "a")
	if err != nil || len(qs) != 2 || qs[0].GetName() != "a1" {
		t.Fatalf("list: %v, %v", qs, err)
	}
	q, err := c.UpdateQueue(ctx, "a1", &client.QueueConfig{VisibilityTimeout: durationOf(2 * time.Minute)}, "visibility_timeout")
	if err != nil || q.GetConfig().GetVisibilityTimeout().AsDuration() != 2*time.Minute {
		t.Fatalf("update: %v, %v", q, err)
	}
	if _, err := c.UpdateQueue(ctx, "a1", &client.QueueConfig{Fifo: true}, "fifo"); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("update fifo: %v", err)
	}
	if n, err := c.PurgeQueue(ctx, "a1"); err != nil || n != 0 {
		t.Errorf("purge: %d, %v", n, err)
	}
	if err := c.DeleteQueue(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetQueue(ctx, "b1"); !errors.Is(err, client.ErrQueueNotFound) {
		t.Errorf("get deleted: %v", err)
	}
}

func mustCreate(t *testing.T, c *client.Client, name string, cfg *client.QueueConfig) {
	t.Helper()
	if _, err := c.CreateQueue(t.Context(), name, cfg); err != nil {
		t.Fatal(err)
	}
}

func receiveOne(t *testing.T, c *client.Client, q string) *client.Message {
	t.Helper()
	msgs, err := c.Receive(t.Context(), q, client.Wait(5*time.Second))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive from %s: %v, %v", q, msgs, err)
	}
	return msgs[0]
}

// TestBatchItemErrorSaysItsReasonOnce: a refused receipt of AckBatch has a
// reason and no message; its text was "RECEIPT_INVALID: RECEIPT_INVALID".
func TestBatchItemErrorSaysItsReasonOnce(t *testing.T) {
	srv := sluicetest.Start(t)
	ctx := t.Context()
	c := client.New(srv.URL)
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	errs, err := c.AckBatch(ctx, "q", []string{"bogus"})
	if err != nil || len(errs) != 1 {
		t.Fatalf("AckBatch: %v, %v", errs, err)
	}
	if !errors.Is(errs[0], client.ErrReceiptInvalid) || errs[0].Error() != "sluice: RECEIPT_INVALID" {
		t.Errorf("item error %q (%v); want \"sluice: RECEIPT_INVALID\" matching ErrReceiptInvalid", errs[0], errs[0])
	}
}
