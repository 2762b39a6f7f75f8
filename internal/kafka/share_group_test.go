package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// shareMember is a KIP-932 share consumer driven by hand: heartbeat, then
// ShareFetch / ShareAcknowledge in one share session.
type shareMember struct {
	t     *testing.T
	r     *rawConn
	group string
	id    string
	epoch int32 // member epoch
	sess  int32 // share session epoch
	tid   [16]byte
}

func (n *node) shareMember(t *testing.T, group, id, topic string) *shareMember {
	t.Helper()
	m := &shareMember{t: t, r: n.raw(), group: group, id: id}
	hb := m.heartbeat(0, []string{topic})
	if hb.ErrorCode != 0 || hb.Assignment == nil || len(hb.Assignment.TopicPartitions) != 1 {
		t.Fatalf("join: %v %+v", kerr.ErrorForCode(hb.ErrorCode), hb.Assignment)
	}
	m.tid = hb.Assignment.TopicPartitions[0].TopicID
	return m
}

func (m *shareMember) heartbeat(epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, m.group, m.id, epoch, topics
	resp := m.r.do(req).(*kmsg.ShareGroupHeartbeatResponse)
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
	}
	return resp
}

type ackRange struct {
	first, last int64
	typ         int8
}

// fetch sends a ShareFetch of partition 0 with acks, at the session epoch.
func (m *shareMember) fetch(maxRecords int32, acks ...ackRange) *kmsg.ShareFetchResponse {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 2, &m.group, &m.id, m.sess
	req.MaxRecords, req.BatchSize, req.MaxBytes = maxRecords, maxRecords, 1<<20
	tp := kmsg.NewShareFetchRequestTopicPartition()
	for _, a := range acks {
		b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, []int8{a.typ}
		tp.AcknowledgementBatches = append(tp.AcknowledgementBatches, b)
	}
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID, t.Partitions = m.tid, []kmsg.ShareFetchRequestTopicPartition{tp}
	req.Topics = []kmsg.ShareFetchRequestTopic{t}
	resp := m.r.do(req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 {
		m.sess++
	}
	return resp
}

func (m *shareMember) ack(acks ...ackRange) *kmsg.ShareAcknowledgeResponse {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 2, &m.group, &m.id, m.sess
	tp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, a := range acks {
		b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, []int8{a.typ}
		tp.AcknowledgementBatches = append(tp.AcknowledgementBatches, b)
	}
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID, t.Partitions = m.tid, []kmsg.ShareAcknowledgeRequestTopicPartition{tp}
	req.Topics = []kmsg.ShareAcknowledgeRequestTopic{t}
	resp := m.r.do(req).(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode == 0 {
		m.sess++
	}
	return resp
}

// acquired lists a response's acquired offsets with their delivery counts.
func acquired(resp *kmsg.ShareFetchResponse) map[int64]int16 {
	out := map[int64]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					out[o] = a.DeliveryCount
				}
			}
		}
	}
	return out
}

func partErrs(resp *kmsg.ShareFetchResponse) (fetch, ack int16) {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				fetch = p.ErrorCode
			}
			if p.AcknowledgeErrorCode != 0 {
				ack = p.AcknowledgeErrorCode
			}
		}
	}
	return fetch, ack
}

func produceN(t *testing.T, n *node, topic string, count int) {
	t.Helper()
	cl := n.client()
	defer cl.Close()
	ctx := testCtx(t, 10*time.Second)
	for i := range count {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// setShareConfig sets group configs through IncrementalAlterConfigs.
func setShareConfig(t *testing.T, n *node, group string, kv ...string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], &kv[i+1]
		res.Configs = append(res.Configs, c)
	}
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res}
	resp := n.raw().do(req).(*kmsg.IncrementalAlterConfigsResponse)
	return resp.Resources[0].ErrorCode
}

// TestShareGroupProtocol: two members of one share group on one partition
// get disjoint records; accept, release (redelivered with its count),
// reject (archived) and a lock that runs out (redelivered); and a classic
// consumer reads every record of the same topic meanwhile.
func TestShareGroupProtocol(t *testing.T) {
	clock := newTestClock()
	n := startConsumerNode(t, clock, broker.ConsumerGroupConfig{})
	n.createTopic("st", 1)
	if code := setShareConfig(t, n, "sg", "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2"); code != 0 {
		t.Fatalf("alter configs: %v", kerr.ErrorForCode(code))
	}
	produceN(t, n, "st", 6)
	a, b := n.shareMember(t, "sg", "member-a", "st"), n.shareMember(t, "sg", "member-b", "st")

	ra := a.fetch(3)
	rb := b.fetch(10)
	ga, gb := acquired(ra), acquired(rb)
	if len(ga) != 3 || len(gb) != 3 {
		t.Fatalf("acquired a=%v b=%v, want 3 each", ga, gb)
	}
	for o := range ga {
		if _, dup := gb[o]; dup {
			t.Fatalf("offset %d acquired by both members", o)
		}
	}
	if ra.AcquisitionLockTimeoutMillis != 30000 {
		t.Fatalf("lock timeout %d", ra.AcquisitionLockTimeoutMillis)
	}
	if len(ra.Topics[0].Partitions[0].Records) == 0 {
		t.Fatal("no record batches with the acquired records")
	}
	// a accepts 0, releases 1, rejects 2 (its offsets are 0-2: lowest first).
	resp := a.fetch(0, ackRange{0, 0, 1}, ackRange{1, 1, 2}, ackRange{2, 2, 3})
	if _, ack := partErrs(resp); ack != 0 {
		t.Fatalf("acks: %v", kerr.ErrorForCode(ack))
	}
	if got := acquired(resp); len(got) != 1 || got[1] != 2 {
		t.Fatalf("after release: acquired %v, want offset 1 with delivery count 2", got)
	}
	// Released again at the limit (2): archived, never delivered again.
	if r := a.ack(ackRange{1, 1, 2}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("release: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// b's lock runs out: its records go to a, with delivery count 2.
	clock.advance(31 * time.Second)
	b.heartbeat(b.epoch, nil)
	a.heartbeat(a.epoch, nil)
	got := acquired(a.fetch(10))
	if len(got) != 3 {
		t.Fatalf("after b's lock ran out a acquired %v, want b's 3", got)
	}
	for o := range gb {
		if got[o] != 2 {
			t.Fatalf("offset %d redelivered with count %d, want 2", o, got[o])
		}
	}
	// b's acks of records it no longer holds are refused, nothing changes.
	if r := b.ack(ackRange{3, 5, 1}); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("stale ack: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	if r := a.fetch(0, ackRange{3, 5, 1}); func() int16 { _, e := partErrs(r); return e }() != 0 {
		t.Fatal("a's accept refused")
	}
	if got := acquired(a.fetch(10)); len(got) != 0 {
		t.Fatalf("everything settled, yet acquired %v", got)
	}

	// A classic consumer of the same topic sees all six records.
	cl := n.client(kgo.ConsumeTopics("st"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := 0
	for seen < 6 && ctx.Err() == nil {
		seen += len(cl.PollFetches(ctx).Records())
	}
	if seen != 6 {
		t.Fatalf("classic consumer saw %d records, want 6", seen)
	}
}
