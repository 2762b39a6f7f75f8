package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareSeen is what franz-go share consumers of a test did: which member accepted each
// value, and how often each was delivered.
type shareSeen struct {
	mu        sync.Mutex
	accepted  map[int]string
	delivered map[int]int
	counts    map[int]int32 // the highest delivery count each was delivered with
}

func (s *shareSeen) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.accepted)
}

// shareConsume runs a franz-go v1.22.3 share consumer (KIP-932) of group on topic through
// the whole cluster, accepting every record, pace after each; stop flushes its
// acknowledgements (reporting whether the broker confirmed them all) and leaves.
func (c *cluster) shareConsume(t *testing.T, group, topic, name string, pace time.Duration, seen *shareSeen) (stop func() error) {
	var ackErrs []error
	var ackMu sync.Mutex
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.ShareMaxRecords(5), kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			ackMu.Lock()
			defer ackMu.Unlock()
			if err := rs.Error(); err != nil {
				ackErrs = append(ackErrs, err)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				r.Ack(kgo.AckAccept)
				v, _ := strconv.Atoi(string(r.Value))
				seen.mu.Lock()
				seen.accepted[v] = name
				seen.delivered[v]++
				seen.counts[v] = max(seen.counts[v], r.DeliveryCount())
				seen.mu.Unlock()
				time.Sleep(pace)
			})
		}
	}()
	return func() error {
		cancel()
		<-done
		fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer fcancel()
		err := cl.FlushAcks(fctx)
		cl.Close()
		ackMu.Lock()
		defer ackMu.Unlock()
		if err == nil && len(ackErrs) > 0 {
			err = ackErrs[0]
		}
		return err
	}
}

// setShareConfigOn sets a share group's configs through node id: they are the catalog's,
// so every node serves them (docs/cluster.md, "Share groups").
func (c *cluster) setShareConfigOn(ctx context.Context, t *testing.T, id int, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kv); i += 2 {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = kv[i], &kv[i+1]
		res.Configs = append(res.Configs, cfg)
	}
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res}
	for {
		resp, err := req.RequestWith(ctx, c.nodeClient(t, id))
		if err == nil {
			err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("share group config on node %d: %v", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestShareGroupLeaderKilled: three nodes, a topic of one partition on all three, and
// franz-go share consumers (KIP-932) of it through the whole cluster: the member joins on
// the coordinator FindCoordinator names, its ShareFetches go to the partition's leader.
// The first consumer accepts the first 30 records and flushes its acknowledgements (the
// broker confirmed them), then the partition's leader is SIGKILLed; a second consumer,
// re-routed by Metadata to the next leader, accepts every other record, and the new leader
// is killed too while it consumes. The group's configs are set through one node. Checked: every record is accepted; none the first
// consumer's flush confirmed is delivered again; every record is delivered at most twice
// (once more per kill, for the acknowledgements in flight at it). On main a cluster node
// answered ShareGroupHeartbeat UNSUPPORTED_VERSION.
func TestShareGroupLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "jobs", 1, 3)
	// Through one node only: the coordinator (for earliest) and the leaders (for the lock)
	// read them from the catalog.
	c.setShareConfigOn(ctx, t, 3, "workers", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "2000")
	prod := c.client()
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "jobs", Value: []byte(strconv.Itoa(i))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %d-%d: %v", from, to, err)
		}
	}
	waitAccepted := func(seen *shareSeen, n int, what string) {
		for seen.n() < n {
			if ctx.Err() != nil {
				t.Fatalf("%s: %d of %d records accepted", what, seen.n(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	produce(0, 30)
	first := &shareSeen{accepted: map[int]string{}, delivered: map[int]int{}, counts: map[int]int32{}}
	stop := c.shareConsume(t, "workers", "jobs", "first", 0, first)
	waitAccepted(first, 30, "first consumer")
	if err := stop(); err != nil {
		t.Fatalf("first consumer's acknowledgements: %v", err)
	}
	l1 := 0
	for l1 == 0 && ctx.Err() == nil {
		l1 = c.leaderOf(ctx, adm, "jobs", 0)
	}
	c.checkShareLeaderHint(ctx, t, adm, "workers", "jobs", l1)
	c.kill(l1)
	t.Logf("first consumer accepted 0-29; killed the leader, node %d", l1)
	produce(30, 60)
	second := &shareSeen{accepted: map[int]string{}, delivered: map[int]int{}, counts: map[int]int32{}}
	// Slow enough that the next kill lands while it holds records and acknowledgements
	// are in flight.
	stop = c.shareConsume(t, "workers", "jobs", "second", 30*time.Millisecond, second)
	waitAccepted(second, 10, "second consumer before the second kill")
	c.start(l1)
	l2 := 0
	for (l2 == 0 || l2 == l1) && ctx.Err() == nil {
		l2 = c.leaderOf(ctx, adm, "jobs", 0)
	}
	c.kill(l2)
	t.Logf("second consumer accepted %d; killed the next leader, node %d", second.n(), l2)
	produce(60, 90)
	waitAccepted(second, 60, "second consumer after the second kill")
	if err := stop(); err != nil {
		t.Logf("second consumer's acknowledgements: %v (some were in flight at a kill)", err)
	}
	c.start(l2)
	second.mu.Lock()
	defer second.mu.Unlock()
	again := 0
	for v, n := range second.delivered {
		switch {
		case v < 30:
			t.Fatalf("record %d delivered again after its acceptance was confirmed", v)
		case n > 2:
			t.Fatalf("record %d delivered %d times across one kill", v, n)
		case n > 1:
			again++
		}
	}
	for v := 30; v < 90; v++ {
		if second.accepted[v] == "" {
			t.Fatalf("record %d never accepted", v)
		}
	}
	t.Logf("60 records accepted through two leader kills; %d delivered twice (held or acknowledgements in flight at the kill), highest delivery count %d",
		again, slices.Max(slices.Collect(maps.Values(second.counts))))

	// AlterShareGroupOffsets once the group is empty, through Kafka: on the coordinator,
	// which has the partition's leader (itself or another node) move the start. What lies
	// below it (90-94, never delivered, and anything whose acceptance a kill lost) is never
	// delivered again; the next consumer starts at 95.
	produce(90, 100)
	c.alterShareStart(ctx, t, "workers", "jobs", 0, 95)
	third := &shareSeen{accepted: map[int]string{}, delivered: map[int]int{}, counts: map[int]int32{}}
	stop = c.shareConsume(t, "workers", "jobs", "third", 0, third)
	waitAccepted(third, 5, "third consumer after the start moved to 95")
	if err := stop(); err != nil {
		t.Logf("third consumer's acknowledgements: %v", err)
	}
	third.mu.Lock()
	defer third.mu.Unlock()
	for v := range third.delivered {
		if v < 95 {
			t.Fatalf("record %d delivered after the share group's start moved to 95", v)
		}
	}
}

// alterShareStart sends AlterShareGroupOffsets (franz-go routes it to the group's
// coordinator) until the partition answers without error: the group may still have the
// members of consumers just stopped (NON_EMPTY_GROUP), and a coordinator may be moving.
func (c *cluster) alterShareStart(ctx context.Context, t *testing.T, group, topic string, partition int32, start int64) {
	t.Helper()
	cl := c.client()
	defer cl.Close()
	for {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = partition, start
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
			err = fmt.Errorf("answer for %d topics", len(resp.Topics))
		}
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("AlterShareGroupOffsets %s %s/%d to %d: %v", group, topic, partition, start, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkShareLeaderHint sends a ShareFetch of topic/0 to a node that does not lead it: the
// partition answers NOT_LEADER_OR_FOLLOWER naming the leader, its epoch and endpoint
// (KIP-951), so a client moves there without a Metadata round trip.
func (c *cluster) checkShareLeaderHint(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, leader int) {
	t.Helper()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics[topic]
	epoch := td.Partitions[0].LeaderEpoch
	other := leader%3 + 1
	cl := c.client()
	req := kmsg.NewPtrShareFetchRequest()
	member := "leader-hint-probe"
	req.GroupID, req.MemberID, req.MaxRecords, req.BatchSize = &group, &member, 1, 1
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = td.ID
	rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{kmsg.NewShareFetchRequestTopicPartition()}
	req.Topics = []kmsg.ShareFetchRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl.Broker(other))
	if err != nil {
		t.Fatalf("share fetch on node %d: %v", other, err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("share fetch on node %d: %+v", other, resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != int32(leader) || p.CurrentLeader.LeaderEpoch != epoch {
		t.Fatalf("share fetch of %s/0 on node %d (node %d leads at epoch %d): error %v, current leader %+v", topic, other, leader, epoch,
			kerr.ErrorForCode(p.ErrorCode), p.CurrentLeader)
	}
	if !slices.ContainsFunc(resp.NodeEndpoints, func(e kmsg.ShareFetchResponseNodeEndpoint) bool {
		return e.NodeID == int32(leader) && fmt.Sprintf("%s:%d", e.Host, e.Port) == c.kafka[leader-1]
	}) {
		t.Fatalf("node endpoints %+v lack node %d at %s", resp.NodeEndpoints, leader, c.kafka[leader-1])
	}
}
