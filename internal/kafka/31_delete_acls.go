package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDeleteACLs removes from the users file every binding a filter
// matches (acl_binding.go; a rule that loses some of its bindings is split
// so the rest stay), and answers each filter with the bindings it matched.
// It needs alter on the cluster.
func handleDeleteACLs(_ context.Context, c *conn, req *kmsg.DeleteACLsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	fail := func(code int16, msgText *string) (reply, error) {
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == 0 {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msgText
				resp.Results[i].MatchingACLs = nil
			}
		}
		return msg(resp)
	}
	if code, err := c.aclAdmin(); code != 0 {
		return fail(code, errMessage(err))
	}
	filters := make([]aclFilter, len(req.Filters))
	for i, rf := range req.Filters {
		filters[i] = aclFilter{rt: rf.ResourceType, name: rf.ResourceName, pt: rf.ResourcePatternType,
			prin: rf.Principal, host: rf.Host, op: rf.Operation, perm: rf.PermissionType}
		if err := filters[i].valid(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, errMessage(err)
		}
	}
	err := c.s.editACLs(func(rules []auth.Rule) []auth.Rule {
		var gone []binding
		for _, b := range bindings(rules) {
			for i, f := range filters {
				if resp.Results[i].ErrorCode != 0 || !f.matches(b) {
					continue
				}
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, matchingACL(b))
				if !slices.Contains(gone, b) {
					gone = append(gone, b)
				}
			}
		}
		if len(gone) == 0 {
			return rules
		}
		return withoutBindings(rules, gone)
	})
	if err != nil {
		return fail(kerr.UnknownServerError.Code, errMessage(err))
	}
	return msg(resp)
}

func matchingACL(b binding) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType, m.ResourceName, m.ResourcePatternType = b.kafkaResource()
	m.Principal, m.Host, m.Operation, m.PermissionType = b.principal(), "*", opToKafka[b.op], b.permission()
	return m
}
