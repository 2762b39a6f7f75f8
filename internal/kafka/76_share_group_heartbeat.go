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
	res := c.s.b.ShareGroupHeartbeat(hr)
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

// handleShareGroupDescribe describes share groups, their members and
// assignments.
func handleShareGroupDescribe(ctx context.Context, c *conn, req *kmsg.ShareGroupDescribeRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID, g.Assignor, g.AuthorizedOperations = id, "simple", -2147483648
		if !c.may(auth.Describe, auth.Group, id) {
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		info, err := c.s.b.DescribeShareGroup(id)
		if err != nil {
			g.ErrorCode, g.ErrorMessage = errCode(err, nil), errMessage(err)
			g.GroupState = "Dead"
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.GroupState, g.GroupEpoch, g.AssignmentEpoch = info.State, info.Epoch, info.Epoch
		for _, m := range info.Members {
			gm := kmsg.NewShareGroupDescribeResponseGroupMember()
			gm.MemberID, gm.MemberEpoch, gm.ClientID, gm.ClientHost = m.MemberID, m.Epoch, m.ClientID, m.Host
			gm.SubscribedTopicNames = m.Topics
			if m.Rack != "" {
				gm.RackID = &m.Rack
			}
			for _, tp := range m.Assignment {
				s, ok := c.topicSettings(tp.Topic)
				if !ok {
					continue
				}
				at := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				at.TopicID, at.Topic, at.Partitions = topicID(s), tp.Topic, tp.Partitions
				gm.Assignment.TopicPartitions = append(gm.Assignment.TopicPartitions, at)
			}
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return msg(resp)
}
