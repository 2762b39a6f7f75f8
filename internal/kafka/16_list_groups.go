package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleListGroups lists every group, filtered by state when v4+ asks and
// by type when v5+ asks: "classic" or "consumer" (KIP-848; KIP-932's
// "share" groups are not served yet).
// As in Kafka, describe on the cluster shows every group; otherwise only
// the groups the principal may describe are listed.
func handleListGroups(ctx context.Context, c *conn, req *kmsg.ListGroupsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	all := c.mayCluster(auth.Describe)
	wantType := func(t string) bool {
		return len(req.TypesFilter) == 0 || slices.ContainsFunc(req.TypesFilter, func(f string) bool { return strings.EqualFold(f, t) })
	}
	// A broker lists the groups it coordinates: in a cluster a node other than the
	// controller coordinates none (clients ask every broker and merge).
	if err := c.s.b.CheckCoordinator(ctx); errors.Is(err, broker.ErrNotCoordinator) {
		return msg(resp)
	} else if err != nil {
		resp.ErrorCode = errCode(err, nil)
		return msg(resp)
	}
	for _, g := range c.s.b.ListGroups() {
		if !all && !c.sees(auth.Group, g.Group) {
			continue
		}
		state := g.State.String()
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, state) }) {
			continue
		}
		if !wantType(g.Type) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Group, g.ProtocolType, state, g.Type
		resp.Groups = append(resp.Groups, rg)
	}
	return msg(resp)
}
