package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

func TestSplitAdvertised(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int32
		ok   bool
	}{
		{"", "", 0, true},
		{"kafka.internal:9092", "kafka.internal", 9092, true},
		{"[::1]:19092", "::1", 19092, true},
		{"0.0.0.0:9092", "", 0, false},
		{"[::]:9092", "", 0, false},
		{":9092", "", 0, false},
		{"host:0", "", 0, false},
		{"host:99999", "", 0, false},
		{"host", "", 0, false},
	} {
		host, port, err := SplitAdvertised(tc.in)
		if (err == nil) != tc.ok || host != tc.host || port != tc.port {
			t.Errorf("SplitAdvertised(%q) = %q, %d, %v", tc.in, host, port, err)
		}
	}
}

// TestAutoCreate: Metadata creates a missing topic only when the
// front-end allows it and the request asks for it.
func TestAutoCreate(t *testing.T) {
	meta := func(n *node, topic string, allow bool) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		req.AllowAutoTopicCreation = allow
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = &topic
		req.Topics = append(req.Topics, mt)
		return n.raw().do(req).(*kmsg.MetadataResponse).Topics[0]
	}
	off := startNode(t, "")
	if got := meta(off, "auto", true); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("auto-create off: %+v", got)
	}
	on := startNodeWith(t, "", broker.SyncPolicy{Mode: broker.SyncNever}, Config{AutoCreateTopics: true, DefaultPartitions: 3})
	if got := meta(on, "manual", false); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("request without allow: %+v", got)
	}
	got := meta(on, "auto", true)
	if got.ErrorCode != 0 || len(got.Partitions) != 3 {
		t.Fatalf("auto-created: %+v", got)
	}
	if bad := meta(on, "bad name", true); bad.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: %+v", bad)
	}
	// A reserved name is refused at once (a client fails its produce), not left unknown
	// (a client would wait for it until its own timeout); without auto-creation asked, it
	// is simply unknown.
	if reserved := meta(on, "__mine", true); reserved.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("reserved name, auto-created: %+v", reserved)
	}
	if reserved := meta(on, "__mine", false); reserved.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("reserved name, not auto-created: %+v", reserved)
	}
	// Lookup by topic id (v10+).
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.TopicID = got.TopicID
	req.Topics = append(req.Topics, mt)
	byID := on.raw().do(req).(*kmsg.MetadataResponse).Topics[0]
	if byID.ErrorCode != 0 || byID.Topic == nil || *byID.Topic != "auto" {
		t.Fatalf("by topic id: %+v", byID)
	}
}

func TestCoordinatorsAndProducerIDs(t *testing.T) {
	n := startNode(t, "")
	r := n.raw()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorKey, fc.CoordinatorType = "txn", 1
	if resp := r.do(fc).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != 0 || resp.Host != "127.0.0.1" || resp.NodeID != 0 {
		t.Fatalf("transaction coordinator: %+v", resp)
	}
	fc.CoordinatorKey, fc.CoordinatorType = "g", 0
	if resp := r.do(fc).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != 0 || resp.Host != "127.0.0.1" || resp.NodeID != 0 {
		t.Fatalf("group coordinator: %+v", resp)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	txn := "t1"
	ip.TransactionalID = &txn
	ip.TransactionTimeoutMillis = 60000
	if resp := r.do(ip).(*kmsg.InitProducerIDResponse); resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		t.Fatalf("transactional init: %+v", resp)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeBroker, "0", []string{"num.partitions", "connections.max.idle.ms"}
	dc.Resources = append(dc.Resources, res)
	got := r.do(dc).(*kmsg.DescribeConfigsResponse).Resources[0]
	if got.ErrorCode != 0 || len(got.Configs) != 2 || *got.Configs[0].Value != "1" || *got.Configs[1].Value != "600000" {
		t.Fatalf("broker configs: %+v", got)
	}
}

// TestDeleteGroups: a group with a member cannot be deleted; once it has
// left, the group and its offsets go.
func TestDeleteGroups(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("dg", 1)
	r := n.raw()
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3) // no MEMBER_ID_REQUIRED round trip
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "dg", 30000, 30000, "consumer"
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	join.Protocols = append(join.Protocols, proto)
	jr := r.do(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.LeaderID != jr.MemberID {
		t.Fatalf("join: %+v", jr)
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"dg"}
	if resp := r.do(dg).(*kmsg.DeleteGroupsResponse); resp.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %+v", resp)
	}
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Groups = []string{"dg", "nosuch"}
	d := r.do(desc).(*kmsg.DescribeGroupsResponse)
	if d.Groups[0].State != "CompletingRebalance" || len(d.Groups[0].Members) != 1 || d.Groups[1].State != "Dead" {
		t.Fatalf("describe: %+v", d.Groups)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "dg", jr.MemberID
	if resp := r.do(leave).(*kmsg.LeaveGroupResponse); resp.ErrorCode != 0 {
		t.Fatalf("leave: %+v", resp)
	}
	if resp := r.do(dg).(*kmsg.DeleteGroupsResponse); resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete empty: %+v", resp)
	}
	if resp := r.do(dg).(*kmsg.DeleteGroupsResponse); resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete again: %+v", resp)
	}
}
