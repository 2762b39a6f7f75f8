package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleListGroups lists every group, filtered by state when v4+ asks.
// As in Kafka, describe on the cluster shows every group; otherwise only
// the groups the principal may describe are listed.
func handleListGroups(_ context.Context, c *conn, req *kmsg.ListGroupsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	all := c.mayCluster(auth.Describe)
	for _, g := range c.s.b.ListGroups() {
		if !all && !c.sees(auth.Group, g.Group) {
			continue
		}
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
