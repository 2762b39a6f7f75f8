package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/broker"
)

// TestGroupDescribeKIP848: `sluice group describe` of a KIP-848 consumer
// group shows its protocol, the group and assignment epochs, the assignor,
// and each member's epoch, assignment and target, mid-reconciliation.
func TestGroupDescribeKIP848(t *testing.T) {
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sync: broker.SyncPolicy{Mode: broker.SyncNever}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(broker.TopicSettings{Name: "t", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	a := api.New(api.Options{Broker: b, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	join := func(id string) {
		res := b.ConsumerGroupHeartbeat(context.Background(), broker.ConsumerHeartbeatRequest{Group: "g", MemberID: id,
			RebalanceTimeout: time.Minute, Topics: []string{"t"}, Owned: []broker.TopicPartitions{}, ClientID: "cli-" + id})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	join("m1")
	join("m2") // m1 holds all four; m2 waits for two of them
	out := mustCLI(t, srv.URL, "", "group", "describe", "g")
	for _, want := range []string{"protocol kafka_consumer", "protocol type consumer", "group epoch 2", "assignment epoch 2", "assignor uniform"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if !hasRow(out, "m1", "cli-m1", "t:0,1,2,3", "1") || !hasRow(out, "m2", "cli-m2", "-", "2") {
		t.Errorf("members:\n%s", out)
	}
	if out := mustCLI(t, srv.URL, "", "group", "list"); !hasRow(out, "g", "rebalancing", "kafka_consumer", "2") {
		t.Errorf("list:\n%s", out)
	}
}
