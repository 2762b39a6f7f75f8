package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleElectLeaders: on one node, this node is every partition's only
// replica and already its leader, so each partition answers
// ELECTION_NOT_NEEDED (null topics: every partition of every topic). A
// cluster node makes each partition's preferred replica its leader
// (clusterElect). An unknown topic or partition is
// UNKNOWN_TOPIC_OR_PARTITION. It needs alter on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).
func handleElectLeaders(ctx context.Context, c *conn, req *kmsg.ElectLeadersRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if !c.may(auth.Alter, auth.Cluster, "") {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	topics := req.Topics
	if topics == nil {
		for _, s := range c.s.b.ListTopics("") {
			t := kmsg.ElectLeadersRequestTopic{Topic: s.Name}
			for p := range s.Partitions {
				t.Partitions = append(t.Partitions, p)
			}
			topics = append(topics, t)
		}
	}
	var elect []election
	resp.Topics = make([]kmsg.ElectLeadersResponseTopic, 0, len(topics)) // &rt.Partitions stay put
	for _, t := range topics {
		resp.Topics = append(resp.Topics, kmsg.NewElectLeadersResponseTopic())
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Topic = t.Topic
		n, err := c.s.b.PartitionCount(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			switch {
			case err != nil:
				rp.ErrorCode, rp.ErrorMessage = errCode(err, nil), errMessage(err)
			case p < 0 || p >= n:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case c.s.b.Clustered():
				elect = append(elect, election{topic: t.Topic, rp: &rt.Partitions, i: len(rt.Partitions)})
			default:
				m := fmt.Sprintf("node %d, the only replica, already leads %s/%d", c.s.cfg.NodeID, t.Topic, p)
				rp.ErrorCode, rp.ErrorMessage = kerr.ElectionNotNeeded.Code, &m
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	clusterElect(ctx, c, req, elect)
	return msg(resp)
}
