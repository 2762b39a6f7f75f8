package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleHeartbeat keeps a member's session alive; REBALANCE_IN_PROGRESS
// tells it to rejoin.
func handleHeartbeat(_ context.Context, c *conn, req *kmsg.HeartbeatRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !c.may(auth.Consume, auth.Group, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	hr := broker.HeartbeatRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if req.InstanceID != nil {
		hr.InstanceID = *req.InstanceID
	}
	resp.ErrorCode = errCode(c.s.b.Heartbeat(hr), nil)
	return msg(resp)
}
