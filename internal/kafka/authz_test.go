package kafka

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// asUser is a raw connection authenticated with PLAIN.
func (n *authNode) asUser(user string) *rawConn {
	n.t.Helper()
	r := n.raw()
	if resp := r.saslPlainV1(user, user+"-secret"); resp.ErrorCode != 0 {
		n.t.Fatalf("authenticate %s: %d", user, resp.ErrorCode)
	}
	return r
}

// latest sets req to the newest version served.
func latest[R kmsg.Request](req R) R {
	req.SetVersion(apis[req.Key()].max)
	return req
}

// TestAuthorization sends each API, as a user the rules refuse, and checks
// the API's own code; then as one they allow, that it is not refused.
// alice: produce, consume orders*, g*; bob: consume orders, any group.
func TestAuthorization(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{AutoCreateTopics: true}, "orders", "secret")
	topicCode := func(topic string) func(kmsg.Response) int16 {
		return func(r kmsg.Response) int16 { return firstTopicCode(r, topic) }
	}
	cases := []struct {
		name    string
		req     func() kmsg.Request
		code    func(kmsg.Response) int16
		refused string // user refused
		want    int16
		allowed string // user allowed (answers anything but want)
	}{
		{"metadata named", func() kmsg.Request {
			r := latest(kmsg.NewPtrMetadataRequest())
			r.Topics = []kmsg.MetadataRequestTopic{{Topic: strp("secret")}}
			return r
		}, topicCode("secret"), "alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"fetch", func() kmsg.Request { return fetchReq(12, "secret", 0, 0, 0) },
			topicCode("secret"), "alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"fetch needs consume", func() kmsg.Request { return fetchReq(12, "orders", 0, 0, 0) },
			topicCode("orders"), "admin2", kerr.TopicAuthorizationFailed.Code, "bob"},
		{"produce", func() kmsg.Request { return produceReq(9, -1, "orders", 0, buildBatch(t, 1, nil)) },
			topicCode("orders"), "bob", kerr.TopicAuthorizationFailed.Code, "alice"},
		{"list offsets", func() kmsg.Request {
			r := latest(kmsg.NewPtrListOffsetsRequest())
			r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "secret", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Timestamp: -1}}}}
			return r
		}, topicCode("secret"), "alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"offset for leader epoch", func() kmsg.Request {
			r := latest(kmsg.NewPtrOffsetForLeaderEpochRequest())
			r.ReplicaID = -1
			r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "secret", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{}}}}
			return r
		}, topicCode("secret"), "alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"create topics", func() kmsg.Request {
			r := latest(kmsg.NewPtrCreateTopicsRequest())
			r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "orders-new", NumPartitions: 1, ReplicationFactor: 1}}
			r.ValidateOnly = true
			return r
		}, topicCode("orders-new"), "alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"delete topics", func() kmsg.Request {
			r := latest(kmsg.NewPtrDeleteTopicsRequest())
			r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: strp("secret")}}
			return r
		}, topicCode("secret"), "alice", kerr.TopicAuthorizationFailed.Code, ""},
		{"delete topics v5", func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.Version, r.TopicNames = 5, []string{"secret"}
			return r
		}, topicCode("secret"), "alice", kerr.TopicAuthorizationFailed.Code, ""},
		{"create partitions", func() kmsg.Request {
			r := latest(kmsg.NewPtrCreatePartitionsRequest())
			r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "orders", Count: 3}}
			r.ValidateOnly = true
			return r
		}, topicCode("orders"), "alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"describe configs", func() kmsg.Request {
			r := latest(kmsg.NewPtrDescribeConfigsRequest())
			r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "secret"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
			"alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"find coordinator", func() kmsg.Request {
			r := latest(kmsg.NewPtrFindCoordinatorRequest())
			r.CoordinatorKeys = []string{"h1"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"find coordinator v3", func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.Version, r.CoordinatorKey = 3, "h1"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"join group", func() kmsg.Request {
			r := latest(kmsg.NewPtrJoinGroupRequest())
			r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "h1", "consumer", 10000, 10000
			r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"consumer group heartbeat (KIP-848)", func() kmsg.Request {
			r := latest(kmsg.NewPtrConsumerGroupHeartbeatRequest())
			r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.SubscribedTopicNames = "h1", "m", 30000, []string{"orders"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"consumer group describe (KIP-848)", func() kmsg.Request {
			r := latest(kmsg.NewPtrConsumerGroupDescribeRequest())
			r.Groups = []string{"h1"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"heartbeat", func() kmsg.Request {
			r := latest(kmsg.NewPtrHeartbeatRequest())
			r.Group = "h1"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"sync group", func() kmsg.Request {
			r := latest(kmsg.NewPtrSyncGroupRequest())
			r.Group = "h1"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"leave group", func() kmsg.Request {
			r := latest(kmsg.NewPtrLeaveGroupRequest())
			r.Group, r.Members = "h1", []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"offset commit group", func() kmsg.Request { return commitReq("h1", "orders") },
			topicCode("orders"), "alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"offset commit topic", func() kmsg.Request { return commitReq("g1", "secret") },
			topicCode("secret"), "alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"offset fetch", func() kmsg.Request {
			r := latest(kmsg.NewPtrOffsetFetchRequest())
			r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "h1"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"offset fetch v7", func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version, r.Group = 7, "h1"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"describe groups", func() kmsg.Request {
			r := latest(kmsg.NewPtrDescribeGroupsRequest())
			r.Groups = []string{"h1"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "bob"},
		{"delete groups", func() kmsg.Request {
			r := latest(kmsg.NewPtrDeleteGroupsRequest())
			r.Groups = []string{"h1"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode },
			"bob", kerr.GroupAuthorizationFailed.Code, "admin"},
		{"init producer id", func() kmsg.Request {
			r := latest(kmsg.NewPtrInitProducerIDRequest())
			r.ProducerID, r.ProducerEpoch = -1, -1
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode },
			"bob", kerr.ClusterAuthorizationFailed.Code, "alice"},
		{"incremental alter configs", func() kmsg.Request {
			r := latest(kmsg.NewPtrIncrementalAlterConfigsRequest())
			r.ValidateOnly = true
			r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders",
				Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: strp("1000")}}}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode },
			"alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"alter configs broker", func() kmsg.Request {
			r := latest(kmsg.NewPtrAlterConfigsRequest())
			r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode },
			"alice", kerr.ClusterAuthorizationFailed.Code, "admin"},
		{"offset delete", func() kmsg.Request {
			r := latest(kmsg.NewPtrOffsetDeleteRequest())
			r.Group = "g1"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode },
			"alice", kerr.GroupAuthorizationFailed.Code, "admin"},
		{"describe log dirs", func() kmsg.Request { return latest(kmsg.NewPtrDescribeLogDirsRequest()) },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeLogDirsResponse).ErrorCode },
			"alice", kerr.ClusterAuthorizationFailed.Code, "admin"},
		{"describe producers", func() kmsg.Request {
			r := latest(kmsg.NewPtrDescribeProducersRequest())
			r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "secret", Partitions: []int32{0}}}
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
		},
			"alice", kerr.TopicAuthorizationFailed.Code, "admin"},
		{"elect leaders", func() kmsg.Request { return latest(kmsg.NewPtrElectLeadersRequest()) },
			func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode },
			"alice", kerr.ClusterAuthorizationFailed.Code, "admin"},
		{"alter partition reassignments", func() kmsg.Request { return latest(kmsg.NewPtrAlterPartitionAssignmentsRequest()) },
			func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode },
			"alice", kerr.ClusterAuthorizationFailed.Code, "admin"},
		{"list partition reassignments", func() kmsg.Request { return latest(kmsg.NewPtrListPartitionReassignmentsRequest()) },
			func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode },
			"alice", kerr.ClusterAuthorizationFailed.Code, "admin"},
		{"describe cluster", func() kmsg.Request { return latest(kmsg.NewPtrDescribeClusterRequest()) },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClusterResponse).ErrorCode },
			"alice", kerr.ClusterAuthorizationFailed.Code, "admin"},
	}
	conns := map[string]*rawConn{}
	as := func(user string) *rawConn {
		if conns[user] == nil {
			conns[user] = n.asUser(user)
		}
		return conns[user]
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.code(as(c.refused).do(c.req())); got != c.want {
				t.Errorf("as %s: code %d (%v), want %d", c.refused, got, kerr.ErrorForCode(got), c.want)
			}
			if c.allowed == "" {
				return
			}
			if got := c.code(as(c.allowed).do(c.req())); got == c.want {
				t.Errorf("as %s: refused too (%v)", c.allowed, kerr.ErrorForCode(got))
			}
		})
	}
}

// commitReq is an OffsetCommit v9, the last to name topics by name (v10's
// ids are TestOffsetsByTopicID's; authorization is the same after the id).
func commitReq(group, topic string) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 9
	r.Group, r.Generation = group, -1
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	return r
}

// firstTopicCode is the error of topic (or its first partition) in the
// responses that carry one per topic or partition.
func firstTopicCode(r kmsg.Response, topic string) int16 {
	switch r := r.(type) {
	case *kmsg.MetadataResponse:
		for _, t := range r.Topics {
			if t.Topic != nil && *t.Topic == topic {
				return t.ErrorCode
			}
		}
	case *kmsg.ProduceResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.FetchResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.ListOffsetsResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.OffsetForLeaderEpochResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.CreateTopicsResponse:
		return r.Topics[0].ErrorCode
	case *kmsg.DeleteTopicsResponse:
		return r.Topics[0].ErrorCode
	case *kmsg.CreatePartitionsResponse:
		return r.Topics[0].ErrorCode
	case *kmsg.OffsetCommitResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	}
	return -100
}

// TestAuthorizationListings: Metadata and ListGroups show only what the
// principal may describe, and auto-creation needs create.
func TestAuthorizationListings(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{AutoCreateTopics: true}, "orders", "orders-eu", "secret")
	admin := n.asUser("admin")
	for _, g := range []string{"g1", "h1"} {
		if code := firstTopicCode(admin.do(commitReq(g, "orders")), "orders"); code != 0 {
			t.Fatalf("commit to %s: %v", g, kerr.ErrorForCode(code))
		}
	}
	topicsOf := func(r *rawConn) []string {
		md := r.do(latest(kmsg.NewPtrMetadataRequest())).(*kmsg.MetadataResponse)
		var out []string
		for _, t := range md.Topics {
			out = append(out, *t.Topic)
		}
		slices.Sort(out)
		return out
	}
	groupsOf := func(r *rawConn) []string {
		lg := r.do(latest(kmsg.NewPtrListGroupsRequest())).(*kmsg.ListGroupsResponse)
		var out []string
		for _, g := range lg.Groups {
			out = append(out, g.Group)
		}
		slices.Sort(out)
		return out
	}
	alice, bob := n.asUser("alice"), n.asUser("bob")
	for _, c := range []struct {
		who          string
		r            *rawConn
		topics, grps []string
	}{
		{"admin", admin, []string{"orders", "orders-eu", "secret"}, []string{"g1", "h1"}},
		{"alice", alice, []string{"orders", "orders-eu"}, []string{"g1"}},
		{"bob", bob, []string{"orders"}, []string{"g1", "h1"}},
	} {
		if got := topicsOf(c.r); !slices.Equal(got, c.topics) {
			t.Errorf("%s sees topics %q, want %q", c.who, got, c.topics)
		}
		if got := groupsOf(c.r); !slices.Equal(got, c.grps) {
			t.Errorf("%s sees groups %q, want %q", c.who, got, c.grps)
		}
	}
	// alice may describe orders-new (orders*) but not create it.
	md := latest(kmsg.NewPtrMetadataRequest())
	md.AllowAutoTopicCreation = true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: strp("orders-new")}}
	if code := firstTopicCode(alice.do(md), "orders-new"); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("alice auto-creating: %v", kerr.ErrorForCode(code))
	}
	if code := firstTopicCode(admin.do(md), "orders-new"); code != 0 {
		t.Fatalf("admin auto-creating: %v", kerr.ErrorForCode(code))
	}
}
