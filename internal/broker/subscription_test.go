package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

func (e *env) createSub(s SubscriptionSettings) {
	e.t.Helper()
	if _, err := e.b.CreateSubscription(s); err != nil {
		e.t.Fatalf("create subscription %s: %v", s.Name, err)
	}
}

func (e *env) subReceive(topic, name string, max int) []SubscriptionDelivery {
	e.t.Helper()
	ds, err := e.b.SubscriptionReceive(context.Background(), topic, name, ReceiveOptions{Max: max})
	if err != nil {
		e.t.Fatalf("receive %s/%s: %v", topic, name, err)
	}
	return ds
}

func (e *env) subAck(topic, name string, ds ...SubscriptionDelivery) {
	e.t.Helper()
	for _, d := range ds {
		if err := e.b.SubscriptionAck(context.Background(), topic, name, d.Receipt); err != nil {
			e.t.Fatalf("ack %s/%s %d@%d: %v", topic, name, d.Partition, d.Offset, err)
		}
	}
}

func values(ds []SubscriptionDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Value)
	}
	return out
}

func TestSubscriptionsProgressIndependently(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("events", 2)
	e.createQueue(QueueSettings{Name: "billing-dlq"})
	e.createSub(SubscriptionSettings{Topic: "events", Name: "billing", MaxReceives: 2, DeadLetterQueue: "billing-dlq"})
	e.createSub(SubscriptionSettings{Topic: "events", Name: "audit"})
	for i := range 10 {
		e.produce("events", kv(fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)))
	}
	// audit takes everything and acks it.
	got := e.subReceive("events", "audit", 100)
	if len(got) != 10 {
		t.Fatalf("audit got %d", len(got))
	}
	receipts := make([]string, len(got)+1)
	for i, d := range got {
		receipts[i] = d.Receipt
	}
	receipts[len(got)] = "9:bogus"
	res, err := e.b.SubscriptionAckBatch(context.Background(), "events", "audit", receipts)
	if err != nil || !errors.Is(res[len(got)], ErrReceiptInvalid) || errors.Join(res[:len(got)]...) != nil {
		t.Fatalf("ack batch: %v %v", res, err)
	}
	if more := e.subReceive("events", "audit", 100); len(more) != 0 {
		t.Fatalf("audit got %d after acking all", len(more))
	}
	// billing fails on v0 until it is dead-lettered; the rest it acks.
	var poison SubscriptionDelivery
	for round := range 3 {
		e.clock.Advance(DefaultVisibility + time.Second) // unacked deliveries come back
		ds := e.subReceive("events", "billing", 100)
		for _, d := range ds {
			if string(d.Value) == "v0" {
				poison = d
				continue
			}
			e.subAck("events", "billing", d)
		}
		if round < 2 && poison.ReceiveCount != round+1 {
			t.Fatalf("round %d: poison delivered %d times", round, poison.ReceiveCount)
		}
	}
	if users := e.b.SubscriptionsDeadLetteringTo("billing-dlq"); len(users) != 1 || users[0] != "events/billing" {
		t.Fatalf("dead-letter users: %v", users)
	}
	dl := e.receive("billing-dlq", 10)
	if len(dl) != 1 || string(dl[0].Body) != "v0" || dl[0].DeadLetter == nil || dl[0].DeadLetter.SourceQueue != "events/billing" {
		t.Fatalf("dead letters: %+v", dl)
	}
	if err := e.b.SubscriptionAck(context.Background(), "events", "billing", poison.Receipt); !errors.Is(err, ErrReceiptStale) {
		t.Fatalf("ack of a dead-lettered record: %v", err)
	}
	if st, err := e.b.SubscriptionStats("events", "billing"); err != nil || st.DeadLettered != 1 || st.DLQDepth != 1 || st.Depth() != 0 {
		t.Fatalf("billing stats: %+v %v", st, err)
	}
	if st, _ := e.b.SubscriptionStats("events", "audit"); st.Received != 10 || st.Depth() != 0 {
		t.Fatalf("audit stats: %+v", st)
	}
	if all := e.b.AllSubscriptionStats(); len(all) != 2 {
		t.Fatalf("all stats: %+v", all)
	}
	// audit never saw any of it.
	if more := e.subReceive("events", "audit", 100); len(more) != 0 {
		t.Fatalf("audit affected by billing: %v", values(more))
	}
	// A crash keeps both positions.
	e.produce("events", kv("k", "after"))
	e.crash()
	for _, name := range []string{"audit", "billing"} {
		ds := e.subReceive("events", name, 100)
		if len(ds) != 1 || string(ds[0].Value) != "after" {
			t.Fatalf("%s after crash: %v", name, values(ds))
		}
	}
	subs, _ := e.b.ListSubscriptions("events")
	if len(subs) != 2 {
		t.Fatalf("list: %+v", subs)
	}
	if err := e.b.DeleteSubscription("events", "audit"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.GetSubscription("events", "audit"); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("deleted subscription: %v", err)
	}
}

func TestSubscriptionKeyOrderedThroughNack(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("orders", 1)
	e.createSub(SubscriptionSettings{Topic: "orders", Name: "ship", KeyOrdered: true})
	e.produce("orders", kv("o1", "o1-created"), kv("o2", "o2-created"), kv("o1", "o1-paid"), kv("o2", "o2-paid"), kv("o1", "o1-shipped"))
	e.clock.Advance(time.Minute)
	if st, _ := e.b.SubscriptionStats("orders", "ship"); st.Visible != 5 || st.OldestAge != time.Minute {
		t.Fatalf("stats before receiving: %+v", st)
	}
	// One in flight per key, parallel across keys.
	first := e.subReceive("orders", "ship", 10)
	if got := fmt.Sprint(values(first)); got != "[o1-created o2-created]" {
		t.Fatalf("first receive: %s", got)
	}
	// o1's head fails: nothing else of o1 is delivered until it succeeds.
	if err := e.b.SubscriptionNack(context.Background(), "orders", "ship", first[0].Receipt, 0, "db down"); err != nil {
		t.Fatal(err)
	}
	e.subAck("orders", "ship", first[1])
	next := e.subReceive("orders", "ship", 10)
	if got := fmt.Sprint(values(next)); got != "[o1-created o2-paid]" {
		t.Fatalf("after nack: %s", got)
	}
	e.subAck("orders", "ship", next...)
	var order []string
	for range 10 {
		ds := e.subReceive("orders", "ship", 10)
		if len(ds) == 0 {
			break
		}
		order = append(order, values(ds)...)
		e.subAck("orders", "ship", ds...)
	}
	if got := fmt.Sprint(order); got != "[o1-paid o1-shipped]" {
		t.Fatalf("rest: %s", got)
	}
}

func TestSubscriptionLongPollWokenByProduce(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("wake", 3)
	e.createSub(SubscriptionSettings{Topic: "wake", Name: "s"})
	got := make(chan []SubscriptionDelivery, 1)
	go func() {
		ds, err := e.b.SubscriptionReceive(context.Background(), "wake", "s", ReceiveOptions{Max: 1, Wait: time.Minute})
		if err != nil {
			t.Error(err)
		}
		got <- ds
	}()
	e.produce("wake", kv("key", "hello"))
	if ds := await(t, got); len(ds) != 1 || string(ds[0].Value) != "hello" {
		t.Fatalf("long poll: %v", values(ds))
	}
}

// TestSubscriptionHoldsRetention: size retention deletes old segments only
// once every subscription finished them; time retention expires them from
// subscriptions too.
func TestSubscriptionHoldsRetention(t *testing.T) {
	clock := newClock()
	b, err := Open(Options{Dir: "/d", FS: vfs.NewMem(), Now: clock.Now, Logger: quietLogger(), SegmentBytes: 4096, HeadroomBytes: testHeadroom})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic(TopicSettings{Name: "t", Retention: time.Hour, RetentionBytes: 8192}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(SubscriptionSettings{Topic: "t", Name: "s"}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := b.Produce(context.Background(), "t", []ProduceRecord{{Value: make([]byte, 1000), Key: []byte(fmt.Sprint(i))}}, ProduceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := func() int64 { info, _ := b.DescribeTopic("t"); return info.Partitions[0].LogStartOffset }
	b.Maintain()
	if s := start(); s != 0 {
		t.Fatalf("size retention deleted records the subscription holds: start %d", s)
	}
	ds, err := b.SubscriptionReceive(context.Background(), "t", "s", ReceiveOptions{Max: 20})
	if err != nil || len(ds) != 20 {
		t.Fatalf("receive: %d %v", len(ds), err)
	}
	for _, d := range ds {
		if err := b.SubscriptionAck(context.Background(), "t", "s", d.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	b.Maintain()
	if s := start(); s == 0 || s > 20 {
		t.Fatalf("after acking 20: start %d", s)
	}
	// Past the time retention the rest expires from the subscription too.
	clock.Advance(2 * time.Hour)
	if _, err := b.Produce(context.Background(), "t", []ProduceRecord{{Value: []byte("new")}}, ProduceOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Maintain()
	if s := start(); s < 30 {
		t.Fatalf("after time retention: start %d", s)
	}
	ds, err = b.SubscriptionReceive(context.Background(), "t", "s", ReceiveOptions{Max: 100})
	if err != nil || len(ds) != 1 || string(ds[0].Value) != "new" {
		t.Fatalf("after expiry: %d %v", len(ds), err)
	}
}

func TestSubscriptionSnapshotRestartAndNewPartitions(t *testing.T) {
	e := newEnv(t, nil) // SnapshotEvery 50
	e.createTopic("snap", 2)
	e.createSub(SubscriptionSettings{Topic: "snap", Name: "s", FromEarliest: true})
	for i := range 100 {
		e.produce("snap", kv(fmt.Sprint(i), fmt.Sprint(i)))
	}
	seen := map[string]bool{}
	for range 20 {
		ds := e.subReceive("snap", "s", 7)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if seen[string(d.Value)] {
				t.Fatalf("%s delivered twice", d.Value)
			}
			seen[string(d.Value)] = true
		}
		e.subAck("snap", "s", ds...)
		e.b.Maintain()
	}
	if len(seen) != 100 {
		t.Fatalf("received %d of 100", len(seen))
	}
	e.restart()
	if ds := e.subReceive("snap", "s", 100); len(ds) != 0 {
		t.Fatalf("acked records came back after a restart: %v", values(ds))
	}
	if _, err := e.b.AddPartitions("snap", 4); err != nil {
		t.Fatal(err)
	}
	p := int32(3)
	e.produce("snap", ProduceRecord{Value: []byte("in new partition"), Partition: &p})
	e.crash()
	ds := e.subReceive("snap", "s", 100)
	if len(ds) != 1 || ds[0].Partition != 3 {
		t.Fatalf("record of an added partition: %+v", ds)
	}
}
