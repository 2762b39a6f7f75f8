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
// by type when v5+ asks: "classic", "consumer" (KIP-848) or "share"
// (KIP-932: the groups with members, a config or a subscription named
// after them, broker/share_list.go). A share group whose id is also a
// classic or consumer group's is listed once, as that group: Kafka's group
// ids are one namespace, and that group is the one its clients reach.
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
	wantState := func(state string) bool {
		return len(req.StatesFilter) == 0 || slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, state) })
	}
	add := func(id, protocolType, state, typ string) {
		if (!all && !c.sees(auth.Group, id)) || !wantState(state) || !wantType(typ) {
			return
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = id, protocolType, state, typ
		resp.Groups = append(resp.Groups, rg)
	}
	listed := map[string]bool{}
	for _, g := range c.s.b.ListGroups() {
		listed[g.Group] = true
		add(g.Group, g.ProtocolType, g.State.String(), g.Type)
	}
	for _, g := range c.s.b.ListShareGroups() {
		if !listed[g.Group] {
			add(g.Group, "share", g.State, "share")
		}
	}
	return msg(resp)
}
