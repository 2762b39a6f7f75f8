package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleListGroups lists every group, filtered by state when v4+ asks.
func handleListGroups(_ context.Context, c *conn, req *kmsg.ListGroupsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	for _, g := range c.s.b.ListGroups() {
		state := g.State.String()
		if len(req.StatesFilter) > 0 && !slices.Contains(req.StatesFilter, state) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState = g.Group, g.ProtocolType, state
		resp.Groups = append(resp.Groups, rg)
	}
	return msg(resp)
}
