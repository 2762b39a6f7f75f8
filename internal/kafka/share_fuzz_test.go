package kafka

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// seedShareGroup are populated KIP-932 requests: a join, a heartbeat, a
// leave, a describe, fetches that open, continue and close a session with
// acknowledgements of every type, and an acknowledge.
func seedShareGroup(tid [16]byte) []seedRequest {
	group, member := "fsg", "m1"
	hb := func(epoch int32, topics []string) seedRequest {
		r := kmsg.NewPtrShareGroupHeartbeatRequest()
		r.Version, r.GroupID, r.MemberID, r.MemberEpoch, r.SubscribedTopicNames = 1, group, member, epoch, topics
		return seedRequest{76, 1, r.AppendTo(nil)}
	}
	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.Version, d.GroupIDs = 1, []string{group, "", "nope"}
	fetch := func(epoch int32, renew bool, batches ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) seedRequest {
		r := kmsg.NewPtrShareFetchRequest()
		r.Version, r.GroupID, r.MemberID, r.ShareSessionEpoch, r.MaxRecords, r.IsRenewAck = 2, &group, &member, epoch, 3, renew
		p := kmsg.NewShareFetchRequestTopicPartition()
		p.AcknowledgementBatches = batches
		t := kmsg.NewShareFetchRequestTopic()
		t.TopicID, t.Partitions = tid, []kmsg.ShareFetchRequestTopicPartition{p}
		r.Topics = []kmsg.ShareFetchRequestTopic{t}
		r.ForgottenTopicsData = []kmsg.ShareFetchRequestForgottenTopicsData{{TopicID: tid, Partitions: []int32{1}}}
		return seedRequest{78, 2, r.AppendTo(nil)}
	}
	batch := func(first, last int64, types ...int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
		return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: types}
	}
	a := kmsg.NewPtrShareAcknowledgeRequest()
	a.Version, a.GroupID, a.MemberID, a.ShareSessionEpoch = 2, &group, &member, 2
	a.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: tid, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{
		Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 3, LastOffset: 5, AcknowledgeTypes: []int8{1, 2, 3}}}}}}}
	do := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	do.Version, do.Groups = 1, []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: group}, {GroupID: "x", Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "fz", Partitions: []int32{0, 7, -1}}}}}
	ao := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	ao.GroupID, ao.Topics = "other", []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "fz", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 1}, {Partition: 1, StartOffset: -5}}}}
	dl := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	dl.GroupID, dl.Topics = "other", []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "fz"}, {Topic: "nope"}}
	return []seedRequest{
		{90, 1, do.AppendTo(nil)}, {91, 0, ao.AppendTo(nil)}, {92, 0, dl.AppendTo(nil)},
		hb(0, []string{"fz"}), hb(1, nil), {77, 1, d.AppendTo(nil)},
		fetch(0, false), fetch(1, false, batch(0, 0, 1), batch(1, 1, 2), batch(2, 2, 3)),
		fetch(2, true, batch(3, 4, 4)), {79, 2, a.AppendTo(nil)}, fetch(3, false, batch(0, 1<<50, 0)),
		fetch(-1, false, batch(0, 9, 1)), hb(-1, nil),
	}
}

// FuzzShareGroup runs arbitrary ShareGroupHeartbeat, ShareGroupDescribe,
// ShareFetch, ShareAcknowledge and the share-group offset admin bodies through kmsg's decoding, the
// handlers and the broker's share groups, against one broker whose members
// and sessions carry over from input to input. A fetch's wait is cut to
// nothing (the fuzzer must not sit in long-polls). No input may panic, and
// every answer must encode.
func FuzzShareGroup(f *testing.F) {
	b, err := broker.Open(broker.Options{Dir: f.TempDir(), Logger: quietLogger(), Sync: broker.SyncPolicy{Mode: broker.SyncNever}})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	ts, err := b.CreateTopic(broker.TopicSettings{Name: "fz", Partitions: 2})
	if err != nil {
		f.Fatal(err)
	}
	earliest := "earliest"
	if err := b.AlterShareGroupConfig("fsg", map[string]*string{broker.ShareAutoOffsetResetKey: &earliest}, false); err != nil {
		f.Fatal(err)
	}
	p0 := int32(0)
	recs := []broker.ProduceRecord{{Value: []byte("a"), Partition: &p0}, {Value: []byte("b"), Partition: &p0}, {Value: []byte("c"), Partition: &p0}}
	if _, err := b.Produce(context.Background(), "fz", recs, broker.ProduceOptions{}); err != nil {
		f.Fatal(err)
	}
	keys := map[int16]byte{76: 0, 77: 1, 78: 2, 79: 3, 90: 4, 91: 5, 92: 6}
	for _, s := range seedShareGroup(topicID(ts)) {
		f.Add(keys[s.key], s.version, s.body)
	}
	srv := New(b, Config{Logger: quietLogger(), AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092})
	f.Fuzz(func(t *testing.T, key byte, version int16, body []byte) {
		var req kmsg.Request
		switch key % 7 {
		case 0:
			req = kmsg.NewPtrShareGroupHeartbeatRequest()
		case 1:
			req = kmsg.NewPtrShareGroupDescribeRequest()
		case 2:
			req = kmsg.NewPtrShareFetchRequest()
		case 3:
			req = kmsg.NewPtrShareAcknowledgeRequest()
		case 4:
			req = kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		case 5:
			req = kmsg.NewPtrAlterShareGroupOffsetsRequest()
		default:
			req = kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		}
		a := apis[req.Key()]
		req.SetVersion(a.min + int16(uint16(version)%uint16(a.max-a.min+1)))
		if err := req.ReadFrom(body); err != nil {
			return
		}
		if sf, ok := req.(*kmsg.ShareFetchRequest); ok {
			sf.MaxWaitMillis = 0
		}
		ours, theirs := net.Pipe()
		defer ours.Close()
		go io.Copy(io.Discard, theirs)
		c := newConn(srv, ours)
		r, err := func() (r reply, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = errors.New("handler panicked")
				}
			}()
			return a.fn(context.Background(), c, req)
		}()
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		if r.msg != nil {
			r.msg.AppendTo(nil)
		}
	})
}
