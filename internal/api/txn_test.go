package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// TestFetchWaitsBehindOpenTransaction: the native Fetch never returns a
// record of an open Kafka transaction, and its long-poll waits while one
// is open (rather than answering at once, again and again, because the
// log holds records past the asked offset), returning the records once
// the transaction commits, without its marker.
func TestFetchWaitsBehindOpenTransaction(t *testing.T) {
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a := api.New(api.Options{Broker: b, Logger: quiet()})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "tx", &client.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	pid, err := b.InitTransactionalProducer("api", time.Minute, broker.TxnProducer{ID: -1, Epoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddPartitionsToTxn("api", pid.ID, pid.Epoch, []broker.TxnPartition{{Topic: "tx"}}); err != nil {
		t.Fatal(err)
	}
	raw, _ := batch.Build([]batch.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte("inside")}},
		batch.Options{Producer: &batch.Producer{ID: pid.ID, Epoch: pid.Epoch}, Transactional: true})
	if _, err := b.ProduceBatches(ctx, "tx", 0, [][]byte{raw}); err != nil {
		t.Fatal(err)
	}
	commitAt := time.Now().Add(500 * time.Millisecond)
	go func() {
		time.Sleep(time.Until(commitAt))
		_ = b.EndTxn("api", pid.ID, pid.Epoch, true)
	}()
	start := time.Now()
	f, err := c.Fetch(context.Background(), &client.FetchRequest{Topic: "tx", MaxWait: durationpb.New(5 * time.Second),
		Partitions: []*client.PartitionOffset{{Partition: 0, Offset: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(commitAt) {
		t.Fatalf("fetch answered after %v, before the commit: %+v", time.Since(start), f)
	}
	recs := f.GetPartitions()[0].GetRecords()
	if len(recs) != 1 || string(recs[0].GetValue()) != "inside" {
		t.Fatalf("after the commit: %+v, want the one record", f)
	}
	if next := f.GetPartitions()[0].GetNextOffset(); next != 2 {
		t.Fatalf("next offset %d, want 2 (past the commit marker at 1)", next)
	}
	// From the marker itself: no records, and on past it.
	f, err = c.Fetch(ctx, &client.FetchRequest{Topic: "tx", Partitions: []*client.PartitionOffset{{Partition: 0, Offset: 1}}})
	if err != nil || len(f.GetPartitions()[0].GetRecords()) != 0 || f.GetPartitions()[0].GetNextOffset() != 2 {
		t.Fatalf("past the marker: %+v %v, want no records and next offset 2", f, err)
	}
}
