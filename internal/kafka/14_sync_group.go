package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleSyncGroup relays the leader's assignments: the leader sends
// everyone's, every member (leader included) waits for its own.
func handleSyncGroup(ctx context.Context, c *conn, req *kmsg.SyncGroupRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if !c.may(auth.Consume, auth.Group, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	sr := broker.SyncRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if req.InstanceID != nil {
		sr.InstanceID = *req.InstanceID
	}
	if req.ProtocolType != nil {
		sr.ProtocolType = *req.ProtocolType
	}
	if req.Protocol != nil {
		sr.Protocol = *req.Protocol
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	r, err := c.s.b.SyncGroup(ctx, sr)
	resp.ErrorCode = errCode(err, nil)
	if err != nil {
		return msg(resp)
	}
	resp.ProtocolType, resp.Protocol = &r.ProtocolType, &r.Protocol
	resp.MemberAssignment = r.Assignment
	return msg(resp)
}
