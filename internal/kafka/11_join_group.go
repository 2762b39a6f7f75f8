package kafka

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleJoinGroup joins a member to a classic group and waits, as Kafka
// does, until the generation forms. The broker relays the leader-side
// assignment: the leader gets every member's subscription metadata here
// and sends the assignments in SyncGroup. v4+ first joins get
// MEMBER_ID_REQUIRED with the id to rejoin with (KIP-394).
func handleJoinGroup(ctx context.Context, c *conn, req *kmsg.JoinGroupRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	if !c.may(auth.Consume, auth.Group, req.Group) {
		resp.ErrorCode, resp.Generation = kerr.GroupAuthorizationFailed.Code, -1
		return msg(resp)
	}
	jr := broker.JoinRequest{
		Group: req.Group, MemberID: req.MemberID, ClientID: c.clientID, ClientHost: c.clientHost(),
		RequireKnownMemberID: req.Version >= 4, Mode: broker.LeaderAssigns, ProtocolType: req.ProtocolType,
		SessionTimeout:   time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = 0 // v0 has none: the session timeout serves
	}
	if req.InstanceID != nil {
		jr.InstanceID = *req.InstanceID
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, broker.GroupProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	jr.Topics = subscribedTopics(req.ProtocolType, req.Protocols)
	r, err := c.s.b.JoinGroup(ctx, jr)
	resp.ErrorCode = errCode(err, nil)
	resp.MemberID = r.MemberID
	if err != nil {
		resp.Generation = -1
		return msg(resp)
	}
	resp.Generation, resp.LeaderID = r.Generation, r.Leader
	resp.Protocol, resp.ProtocolType = &r.Protocol, &r.ProtocolType
	for _, m := range r.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
		if m.InstanceID != "" {
			rm.InstanceID = &m.InstanceID
		}
		resp.Members = append(resp.Members, rm)
	}
	return msg(resp)
}

// subscribedTopics reads the topics of a consumer's subscription, so the
// group rebalances when one of them gains partitions. Other protocol
// types (Connect, Streams' own) are opaque: no topics.
func subscribedTopics(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) []string {
	if protocolType != "consumer" {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range protocols {
		var m kmsg.ConsumerMemberMetadata
		if m.ReadFrom(p.Metadata) != nil {
			continue
		}
		for _, t := range m.Topics {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// clientHost is the member's address as Kafka shows it ("/127.0.0.1").
func (c *conn) clientHost() string {
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return "/" + host
}
