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
// v4+ (KIP-699) asks for several keys at once and answers each in
// Coordinators; v0-3 ask for one key and answer at the top level.
// Transactional ids (key type 1) are coordinated by this node on a single
// node; in a cluster by the controller, as groups are (broker/cluster_txn.go).
func handleFindCoordinator(_ context.Context, c *conn, req *kmsg.FindCoordinatorRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key = key
			co.NodeID, co.Host, co.Port, co.ErrorCode, co.ErrorMessage = c.coordinator(req.CoordinatorType, key)
			resp.Coordinators = append(resp.Coordinators, co)
		}
		return msg(resp)
	}
	resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = c.coordinator(req.CoordinatorType, req.CoordinatorKey)
	return msg(resp)
}

// coordinator answers one key: this node, or an error with node -1.
func (c *conn) coordinator(typ int8, key string) (node int32, host string, port int32, code int16, message *string) {
	if typ == coordinatorTypeTxn {
		if !c.mayIdempotent() {
			return -1, "", -1, kerr.TransactionalIDAuthorizationFailed.Code, nil
		}
		if c.s.b.Clustered() {
			return c.clusterCoordinator() // the controller coordinates transactions too
		}
		adv := c.s.advertisedAddr()
		return c.s.cfg.NodeID, adv.host, adv.port, 0, nil
	}
	if !c.may(auth.Describe, auth.Group, key) {
		return -1, "", -1, kerr.GroupAuthorizationFailed.Code, nil
	}
	if c.s.b.Clustered() {
		return c.clusterCoordinator()
	}
	adv := c.s.advertisedAddr()
	return c.s.cfg.NodeID, adv.host, adv.port, 0, nil
}

// clusterCoordinator: in a cluster every group is coordinated by the controller (the
// metadata group's leader), so all members of a group meet on one node; other nodes answer
// group requests NOT_COORDINATOR, and committed offsets are replicated through the metadata
// group (docs/cluster.md, "Consumer groups").
func (c *conn) clusterCoordinator() (int32, string, int32, int16, *string) {
	ctl := c.controller()
	for _, b := range c.brokers() {
		if b.NodeID == ctl {
			return b.NodeID, b.Host, b.Port, 0, nil
		}
	}
	m := "the cluster's controller is being elected, or has not registered its Kafka address"
	return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &m
}
