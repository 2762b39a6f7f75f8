package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDescribeCluster describes the one-node cluster, as Metadata does.
func handleDescribeCluster(_ context.Context, c *conn, req *kmsg.DescribeClusterRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if !c.may(auth.Describe, auth.Cluster, "") {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	adv := c.s.advertisedAddr()
	resp.ClusterID = c.s.cfg.ClusterID
	resp.ControllerID = c.s.cfg.NodeID
	resp.EndpointType = 1 // brokers
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = c.s.cfg.NodeID, adv.host, adv.port
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
	return msg(resp)
}
