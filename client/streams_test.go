package client_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/sluicetest"
)

func TestTopicProduceFetchAndOffsets(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "orders", &client.TopicConfig{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "orders", &client.TopicConfig{Partitions: 3}); err != nil {
		t.Errorf("same config again: %v, want the existing topic", err)
	}
	if _, err := c.CreateTopic(ctx, "orders", &client.TopicConfig{Partitions: 5}); !errors.Is(err, client.ErrTopicAlreadyExists) {
		t.Errorf("different config: %v, want ErrTopicAlreadyExists", err)
	}
	recs := []*client.ProduceRecord{
		{Key: []byte("k"), Value: []byte("a"), Headers: []*client.Header{{Key: "h", Value: []byte("v")}}},
		{Key: []byte("k"), Value: []byte("b")},
	}
	res, err := c.Produce(ctx, "orders", recs, nil)
	if err != nil || len(res) != 2 || res[0].GetPartition() != res[1].GetPartition() || res[1].GetOffset() != res[0].GetOffset()+1 {
		t.Fatalf("produce: %v, %v", res, err)
	}
	p := res[0].GetPartition()
	f, err := c.Fetch(ctx, &client.FetchRequest{Topic: "orders", Partitions: []*client.PartitionOffset{{Partition: p, Offset: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	got := f.GetPartitions()[0]
	if len(got.GetRecords()) != 1 || string(got.GetRecords()[0].GetValue()) != "b" || got.GetNextOffset() != 2 || got.GetHighWatermark() != 2 {
		t.Errorf("fetch from offset 1: %v", got)
	}
	// Out of range is per partition, with the bounds in the metadata.
	f, err = c.Fetch(ctx, &client.FetchRequest{Topic: "orders", Partitions: []*client.PartitionOffset{{Partition: p, Offset: 99}}})
	if err != nil || f.GetPartitions()[0].GetError().GetReason() != "OFFSET_OUT_OF_RANGE" || f.GetPartitions()[0].GetError().GetMetadata()["high_watermark"] != "2" {
		t.Errorf("fetch past the end: %v, %v", f, err)
	}
	// A long poll is woken by a produce.
	done := make(chan *client.FetchResponse, 1)
	go func() {
		r, _ := c.Fetch(ctx, &client.FetchRequest{Topic: "orders", MaxWait: durationpb.New(20 * time.Second),
			Partitions: []*client.PartitionOffset{{Partition: p, Offset: 2}}})
		done <- r
	}()
	if _, err := c.Produce(ctx, "orders", []*client.ProduceRecord{{Key: []byte("k"), Value: []byte("c")}}, nil); err != nil {
		t.Fatal(err)
	}
	if r := waitFor(t, done, "the long-polled fetch"); len(r.GetPartitions()[0].GetRecords()) != 1 {
		t.Errorf("long poll: %v", r)
	}
	offs, err := c.ListOffsets(ctx, &client.ListOffsetsRequest{Topic: "orders", Spec: &sluicev1.ListOffsetsRequest_Latest{Latest: true}})
	if err != nil || len(offs) != 3 || offs[p].GetOffset() != 3 {
		t.Errorf("latest offsets %v, %v", offs, err)
	}
	if _, err := c.AddPartitions(ctx, "orders", 2); !errors.Is(err, client.ErrPartitionsCannotShrink) {
		t.Errorf("shrink: %v", err)
	}
	if _, err := c.Fetch(ctx, &client.FetchRequest{Topic: "nope", Partitions: []*client.PartitionOffset{{}}}); !errors.Is(err, client.ErrTopicNotFound) {
		t.Errorf("fetch from a missing topic: %v", err)
	}
}

func TestIdempotentProducerFencing(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	id, epoch, err := c.InitProducer(ctx, "svc-1")
	if err != nil {
		t.Fatal(err)
	}
	rec := []*client.ProduceRecord{{Value: []byte("x")}}
	idem := &client.Idempotence{ProducerId: id, ProducerEpoch: epoch, BaseSequence: 0}
	first, err := c.Produce(ctx, "t", rec, idem)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Produce(ctx, "t", rec, idem) // a retry: same offset, nothing stored
	if err != nil || again[0].GetOffset() != first[0].GetOffset() {
		t.Errorf("retried produce: %v, %v; want offset %d", again, err, first[0].GetOffset())
	}
	if _, _, err := c.InitProducer(ctx, "svc-1"); err != nil { // a new instance fences the old
		t.Fatal(err)
	}
	idem.BaseSequence = 1
	if _, err := c.Produce(ctx, "t", rec, idem); !errors.Is(err, client.ErrProducerFenced) {
		t.Errorf("zombie produce: %v, want ErrProducerFenced", err)
	}
}

func TestSubscriptionIsReadLikeAQueue(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "events", &client.TopicConfig{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "events", "audit", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "events", []*client.ProduceRecord{{Key: []byte("u1"), Value: []byte("login")}}, nil); err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, c, "events/audit")
	if string(m.GetBody()) != "login" || m.GetGroupId() != "u1" || m.GetReceiveCount() != 1 {
		t.Errorf("subscription delivery %v", m)
	}
	if _, err := c.Extend(ctx, "events/audit", m.GetReceipt(), time.Minute); err != nil {
		t.Errorf("extend: %v", err)
	}
	if q, err := c.GetQueue(ctx, "events/audit"); err != nil || q.GetStats().GetInFlight() != 1 || q.GetStats().GetReceivedTotal() != 1 {
		t.Errorf("subscription stats through GetQueue: %v, %v", q.GetStats(), err)
	}
	errs, err := c.AckBatch(ctx, "events/audit", []string{m.GetReceipt(), "0:garbage"})
	if err != nil || errs[0] != nil || errs[1] == nil {
		t.Fatalf("ack batch: %v, %v", errs, err)
	}
	if err := c.Ack(ctx, "events/audit", m.GetReceipt()); !errors.Is(err, client.ErrReceiptStale) {
		t.Errorf("second ack: %v", err)
	}
	subs, err := c.ListSubscriptions(ctx, "events")
	if err != nil || len(subs) != 1 || subs[0].GetName() != "audit" || subs[0].GetStats().GetInFlight() != 0 {
		t.Errorf("subscriptions %v, %v", subs, err)
	}
	if _, err := c.GetQueue(ctx, "events/nope"); !errors.Is(err, client.ErrSubscriptionNotFound) {
		t.Errorf("missing subscription: %v", err)
	}
	if err := c.DeleteSubscription(ctx, "events", "audit"); err != nil {
		t.Fatal(err)
	}
}

func TestConsumerGroupJoinCommitDescribeReset(t *testing.T) {
	c, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "orders", &client.TopicConfig{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if _, err := c.Produce(ctx, "orders", []*client.ProduceRecord{{Value: []byte(v), Partition: ptr(int32(0))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	j, err := c.JoinGroup(ctx, &client.JoinGroupRequest{Group: "billing", Topics: []string{"orders"}, ClientId: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(j.GetAssignment()); n != 1 || len(j.GetAssignment()[0].GetPartitions()) != 2 {
		t.Fatalf("assignment %v", j.GetAssignment())
	}
	if rebalance, err := c.Heartbeat(ctx, "billing", j.GetMemberId(), j.GetGeneration()); err != nil || rebalance {
		t.Errorf("heartbeat: %v, %v", rebalance, err)
	}
	if err := c.CommitOffsets(ctx, "billing", j.GetMemberId(), j.GetGeneration(), []*client.CommittedOffset{{Topic: "orders", Partition: 0, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitOffsets(ctx, "billing", j.GetMemberId(), j.GetGeneration()-1, []*client.CommittedOffset{{Topic: "orders", Partition: 0, Offset: 2}}); !errors.Is(err, client.ErrGenerationStale) {
		t.Errorf("commit from an old generation: %v", err)
	}
	d, err := c.DescribeGroup(ctx, "billing")
	if err != nil || d.GetSummary().GetMembers() != 1 || d.GetSummary().GetProtocol() != sluicev1.GroupProtocol_GROUP_PROTOCOL_NATIVE {
		t.Fatalf("describe: %v, %v", d, err)
	}
	for _, pl := range d.GetPartitions() {
		if pl.GetPartition() == 0 && (pl.GetCommittedOffset() != 1 || pl.GetLagMessages() != 2 || pl.GetMemberId() != j.GetMemberId()) {
			t.Errorf("lag of partition 0: %v", pl)
		}
	}
	reset := &client.ResetOffsetsRequest{Group: "billing", Topic: "orders", To: &sluicev1.ResetOffsetsRequest_Earliest{Earliest: true}}
	if _, err := c.ResetOffsets(ctx, reset); !errors.Is(err, client.ErrGroupActive) {
		t.Errorf("reset with a member: %v, want ErrGroupActive", err)
	}
	if err := c.LeaveGroup(ctx, "billing", j.GetMemberId()); err != nil {
		t.Fatal(err)
	}
	reset.DryRun = true
	preview, err := c.ResetOffsets(ctx, reset)
	if err != nil || len(preview) != 2 || preview[0].GetOffset() != 0 {
		t.Fatalf("dry run: %v, %v", preview, err)
	}
	if offs, _ := c.FetchOffsets(ctx, "billing", nil); len(offs) != 1 || offs[0].GetOffset() != 1 {
		t.Errorf("a dry run changed the offsets: %v", offs)
	}
	reset.DryRun = false
	if _, err := c.ResetOffsets(ctx, reset); err != nil {
		t.Fatal(err)
	}
	groups, err := c.ListGroups(ctx)
	if err != nil || len(groups) != 1 || groups[0].GetState() != sluicev1.GroupState_GROUP_STATE_EMPTY {
		t.Errorf("groups %v, %v", groups, err)
	}
}

func ptr[T any](v T) *T { return &v }
