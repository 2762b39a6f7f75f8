package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

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
