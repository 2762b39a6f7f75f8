package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleConsumerGroupHeartbeat serves KIP-848's consumer group protocol:
// the coordinator assigns partitions (package group, consumer*.go) and
// hands them out in these answers, one reconciliation step at a time.
// Topics travel by id on the wire and by name in the broker: owned
// partitions of topic ids that name no topic now are dropped (the member
// cannot hold them), and an assignment names each topic by its id.
func handleConsumerGroupHeartbeat(ctx context.Context, c *conn, req *kmsg.ConsumerGroupHeartbeatRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !c.may(auth.Consume, auth.Group, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	if req.MemberEpoch == 0 && len(req.Topics) > 0 {
		// Checked here: owned topics of unknown ids are dropped below, and
		// that must not make a bad join look good.
		m := "TopicPartitions must be empty when (re-)joining"
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &m
		return msg(resp)
	}
	res := c.s.b.ConsumerGroupHeartbeat(ctx, c.consumerHeartbeat(req))
	if res.Err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(res.Err, nil), errMessage(res.Err)
		return msg(resp)
	}
	resp.MemberID, resp.MemberEpoch = &res.MemberID, res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval / time.Millisecond)
	if res.HasAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		for _, tp := range res.Assignment {
			s, ok := c.topicSettings(tp.Topic)
			if !ok {
				continue // deleted since the assignment was computed
			}
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = topicID(s), tp.Partitions
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return msg(resp)
}

// consumerHeartbeat turns the request into the broker's, topic ids into
// names.
func (c *conn) consumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) broker.ConsumerHeartbeatRequest {
	hr := broker.ConsumerHeartbeatRequest{
		Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: req.InstanceID, RackID: req.RackID, RebalanceTimeout: -1,
		Topics: req.SubscribedTopicNames, Regex: req.SubscribedTopicRegex, Assignor: req.ServerAssignor,
		MemberIDRequired: req.Version >= 1, ClientID: c.clientID, ClientHost: c.clientHost(),
	}
	if req.RebalanceTimeoutMillis >= 0 {
		hr.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.Topics != nil {
		hr.Owned = []broker.TopicPartitions{}
		for _, t := range req.Topics {
			if name, ok := c.topicNameByID(t.TopicID); ok {
				hr.Owned = append(hr.Owned, broker.TopicPartitions{Topic: name, Partitions: t.Partitions})
			}
		}
	}
	return hr
}
