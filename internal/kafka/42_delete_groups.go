package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDeleteGroups deletes Empty groups and their committed offsets, and
// empty share groups with their state (their subscriptions: KIP-932's
// DeleteGroups); a group with members answers NON_EMPTY_GROUP.
func handleDeleteGroups(_ context.Context, c *conn, req *kmsg.DeleteGroupsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		if !c.may(auth.Delete, auth.Group, id) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		var err error
		if _, classic := c.s.b.DescribeGroup(id); !classic && isShareGroup(c, id) {
			err = c.s.b.DeleteShareGroup(id)
		} else {
			err = c.s.b.DeleteGroup(id)
		}
		rg.ErrorCode, rg.ErrorMessage = errCode(err, nil), errMessage(err) // the message: v3+
		resp.Groups = append(resp.Groups, rg)
	}
	return msg(resp)
}
