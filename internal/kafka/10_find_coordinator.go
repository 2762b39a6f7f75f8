package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// coordinatorTypeTxn is FindCoordinator's key type for transactional ids.
const coordinatorTypeTxn = 1

// handleFindCoordinator names this node as every group's coordinator.
// Transactions are not supported, so a transaction coordinator is never
// available; a client that asks is a transactional producer that could not
// work anyway.
func handleFindCoordinator(_ context.Context, c *conn, req *kmsg.FindCoordinatorRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.CoordinatorType == coordinatorTypeTxn {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		m := "sluice does not support transactions"
		resp.ErrorMessage = &m
		resp.NodeID, resp.Port = -1, -1
		return msg(resp)
	}
	if !c.may(auth.Describe, auth.Group, req.CoordinatorKey) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		resp.NodeID, resp.Port = -1, -1
		return msg(resp)
	}
	adv := c.s.advertisedAddr()
	resp.NodeID, resp.Host, resp.Port = c.s.cfg.NodeID, adv.host, adv.port
	return msg(resp)
}
