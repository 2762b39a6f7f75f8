package sluicetest_test

import (
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// What a user's test looks like: a real broker, a client, no server to run.
func TestNewServesARealBroker(t *testing.T) {
	c, addr := sluicetest.New(t)
	if addr == "" {
		t.Fatal("no address")
	}
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "orders", []byte("order-1")); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Receive(ctx, "orders")
	if err != nil || len(msgs) != 1 || string(msgs[0].GetBody()) != "order-1" {
		t.Fatalf("receive: %v, %v", msgs, err)
	}
}

// Close shuts down like SIGTERM; a new broker on the same data directory
// still has every acknowledged message.
func TestRestartOnTheSameData(t *testing.T) {
	dir := t.TempDir()
	s := sluicetest.Start(t, sluicetest.WithDataDir(dir))
	c := client.New(s.URL)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "q", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c2, _ := sluicetest.New(t, sluicetest.WithDataDir(dir), sluicetest.WithClientOptions(client.WithProtocol(client.ProtocolGRPC)))
	msgs, err := c2.Receive(ctx, "q")
	if err != nil || len(msgs) != 1 || string(msgs[0].GetBody()) != "kept" {
		t.Fatalf("after restart: %v, %v", msgs, err)
	}
}
