package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDeleteGroups deletes Empty groups and their committed offsets;
// a group with members answers NON_EMPTY_GROUP.
func handleDeleteGroups(_ context.Context, c *conn, req *kmsg.DeleteGroupsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		rg.ErrorCode = errCode(c.s.b.DeleteGroup(id), nil)
		resp.Groups = append(resp.Groups, rg)
	}
	return msg(resp)
}
