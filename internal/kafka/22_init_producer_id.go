package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleInitProducerID gives an idempotent producer a fresh id at epoch 0.
// A producer re-initialising after a sequence error (v3+ sends its old id
// and epoch) also gets a fresh id, which resets its sequences just as an
// epoch bump would. Transactional ids are refused: no transactions yet.
//
// Kafka asks IDEMPOTENT_WRITE on the cluster, or since KIP-679 WRITE on
// any topic; sluice asks produce on the cluster or on some topic, else
// CLUSTER_AUTHORIZATION_FAILED. Each batch is still checked per topic.
func (c *conn) mayIdempotent() bool {
	st := c.s.cfg.Auth
	if c.mayCluster(auth.Produce) || st.AllowedSome(c.sasl.principal, auth.Produce, auth.Topic) {
		return true
	}
	st.Fail(saslProtocol, auth.ReasonDenied, c.sasl.principal, c.peer(), "produce (idempotent) cluster")
	return false
}

func handleInitProducerID(_ context.Context, c *conn, req *kmsg.InitProducerIDRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return msg(resp)
	}
	if !c.mayIdempotent() {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	id, err := c.s.b.InitProducerID("")
	if err != nil {
		resp.ErrorCode = errCode(err, nil)
		return msg(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id.ID, id.Epoch
	return msg(resp)
}
