package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleDescribeGroups describes groups: state, protocol, and each
// member's subscription and assignment as the leader sent it. An unknown
// group is described as Dead with no error, as Kafka does before v6; v6+
// answer GROUP_ID_NOT_FOUND with a message (KIP-1043). A KIP-848 consumer
// group or a share group is answered as an unknown one, as Kafka does.
func handleDescribeGroups(ctx context.Context, c *conn, req *kmsg.DescribeGroupsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		if !c.may(auth.Describe, auth.Group, id) {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if err := c.s.b.CheckCoordinator(ctx); err != nil && id != "" {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = id, errCode(err, nil)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		info, found := c.s.b.DescribeGroup(id)
		if found && info.Type == broker.GroupTypeConsumer || !found && isShareGroup(c, id) {
			// As Kafka: DescribeGroups describes classic groups only;
			// ConsumerGroupDescribe (69) or ShareGroupDescribe (77)
			// describes this one.
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.State = id, broker.GroupDead.String()
			if req.Version >= 6 {
				m := "group " + id + " is not a classic group"
				rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, &m
			}
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.State = id, info.State.String()
		rg.ProtocolType, rg.Protocol = info.ProtocolType, info.Protocol
		switch {
		case id == "":
			rg.ErrorCode = errCode(errInvalidGroupID, nil)
		case !found && req.Version >= 6:
			m := "group " + id + " not found"
			rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, &m
		}
		for _, m := range info.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.ClientID, rm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
			if m.InstanceID != "" {
				rm.InstanceID = &m.InstanceID
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return msg(resp)
}

// isShareGroup reports whether id is a share group's.
func isShareGroup(c *conn, id string) bool {
	_, err := c.s.b.DescribeShareGroup(id)
	return err == nil
}
