package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleLeaveGroup removes members at once, so the group rebalances
// without waiting for their sessions to expire. v0-2 name one member;
// v3+ a batch, each answered on its own.
func handleLeaveGroup(_ context.Context, c *conn, req *kmsg.LeaveGroupRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !c.may(auth.Consume, auth.Group, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	refs := []broker.MemberRef{{MemberID: req.MemberID}}
	if req.Version >= 3 {
		refs = refs[:0]
		for _, m := range req.Members {
			ref := broker.MemberRef{MemberID: m.MemberID}
			if m.InstanceID != nil {
				ref.InstanceID = *m.InstanceID
			}
			refs = append(refs, ref)
		}
	}
	errs, err := c.s.b.LeaveGroup(req.Group, refs)
	if err != nil {
		resp.ErrorCode = errCode(err, nil)
		return msg(resp)
	}
	if req.Version < 3 {
		resp.ErrorCode = errCode(errs[0], nil)
		return msg(resp)
	}
	for i, ref := range refs {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = ref.MemberID
		if ref.InstanceID != "" {
			rm.InstanceID = &ref.InstanceID
		}
		rm.ErrorCode = errCode(errs[i], nil)
		resp.Members = append(resp.Members, rm)
	}
	return msg(resp)
}
