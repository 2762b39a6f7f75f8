package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleConsumerGroupDescribe describes KIP-848 consumer groups: epochs,
// the assignor, and each member's subscription, current and target
// assignment. A classic group, like an unknown one, is GROUP_ID_NOT_FOUND,
// as in Kafka (DescribeGroups describes those).
func handleConsumerGroupDescribe(ctx context.Context, c *conn, req *kmsg.ConsumerGroupDescribeRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = id
		if code, m := c.describeConsumerGroup(ctx, id, &rg, req.Version); code != 0 {
			rg.ErrorCode, rg.ErrorMessage = code, m
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return msg(resp)
}

func (c *conn) describeConsumerGroup(ctx context.Context, id string, rg *kmsg.ConsumerGroupDescribeResponseGroup, version int16) (int16, *string) {
	switch {
	case !c.may(auth.Describe, auth.Group, id):
		return kerr.GroupAuthorizationFailed.Code, nil
	case id == "":
		return errCode(errInvalidGroupID, nil), errMessage(errInvalidGroupID)
	}
	if err := c.s.b.CheckCoordinator(ctx); err != nil {
		return errCode(err, nil), errMessage(err)
	}
	info, found := c.s.b.DescribeGroup(id)
	if !found || info.Type != broker.GroupTypeConsumer {
		m := "group " + id + " not found"
		if found {
			m = "group " + id + " is not a consumer group"
		}
		rg.State = broker.GroupDead.String()
		return kerr.GroupIDNotFound.Code, &m
	}
	rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = info.State.String(), info.Epoch, info.AssignmentEpoch, info.Assignor
	for _, m := range info.Members {
		rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost
		rm.SubscribedTopics = append([]string{}, m.SubscribedTopics...)
		if m.InstanceID != "" {
			rm.InstanceID = &m.InstanceID
		}
		if m.RackID != "" {
			rm.RackID = &m.RackID
		}
		if m.SubscribedRegex != "" {
			rm.SubscribedTopicRegex = &m.SubscribedRegex
		}
		rm.Assignment.TopicPartitions = c.assignmentTopics(m.Partitions)
		rm.TargetAssignment.TopicPartitions = c.assignmentTopics(m.Target)
		if version >= 1 {
			rm.MemberType = 1 // a consumer-protocol member (no classic members in consumer groups)
		}
		rg.Members = append(rg.Members, rm)
	}
	return 0, nil
}

func (c *conn) assignmentTopics(tps []broker.TopicPartitions) []kmsg.AssignmentTopicPartition {
	out := []kmsg.AssignmentTopicPartition{}
	for _, tp := range tps {
		at := kmsg.NewAssignmentTopicPartition()
		at.Topic, at.Partitions = tp.Topic, tp.Partitions
		if s, ok := c.topicSettings(tp.Topic); ok {
			at.TopicID = topicID(s)
		}
		out = append(out, at)
	}
	return out
}
