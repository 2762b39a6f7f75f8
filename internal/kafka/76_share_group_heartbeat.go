package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleShareGroupHeartbeat serves KIP-932's membership call: a member
// joins (epoch 0, naming its topics), heartbeats and leaves (epoch -1);
// the broker assigns it every partition of its topics (broker/share_groups.go).
func handleShareGroupHeartbeat(ctx context.Context, c *conn, req *kmsg.ShareGroupHeartbeatRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if !c.may(auth.Consume, auth.Group, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	hr := broker.ShareHeartbeatRequest{Group: req.GroupID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		Topics: req.SubscribedTopicNames, ClientID: c.clientID, Host: c.clientHost()}
	if req.RackID != nil {
		hr.Rack = *req.RackID
	}
	for _, t := range req.SubscribedTopicNames {
		if !c.may(auth.Consume, auth.Topic, t) {
			resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			return msg(resp)
		}
	}
	res := c.s.b.ShareGroupHeartbeat(ctx, hr)
	if res.Err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(res.Err, nil), errMessage(res.Err)
		return msg(resp)
	}
	resp.MemberID, resp.MemberEpoch = &req.MemberID, res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval / time.Millisecond)
	if res.HasAssignment {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, tp := range res.Assignment {
			s, ok := c.topicSettings(tp.Topic)
			if !ok {
				continue
			}
			at := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			at.TopicID, at.Partitions = topicID(s), tp.Partitions
			a.TopicPartitions = append(a.TopicPartitions, at)
		}
		resp.Assignment = &a
	}
	return msg(resp)
}
