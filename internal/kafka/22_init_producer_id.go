package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleInitProducerID gives an idempotent producer a fresh id at epoch 0.
// A producer re-initialising after a sequence error (v3+ sends its old id
// and epoch) also gets a fresh id, which resets its sequences just as an
// epoch bump would. A transactional id goes to the transaction
// coordinator (24_add_partitions_to_txn.go and the files after it).
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

// mayIdempotentQuiet is mayIdempotent without recording a refusal.
func (c *conn) mayIdempotentQuiet() bool {
	return c.mayCluster(auth.Produce) || c.s.cfg.Auth.AllowedSome(c.sasl.principal, auth.Produce, auth.Topic)
}

func handleInitProducerID(_ context.Context, c *conn, req *kmsg.InitProducerIDRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return initTransactional(c, req, resp)
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

// initTransactional is InitProducerId with a transactional id: the id's
// producer id at a new epoch, fencing the previous instance, after its
// open transaction is aborted (KIP-98); v3+ may name the id and epoch
// the producer holds (KIP-360), and anything else is PRODUCER_FENCED. An
// empty id is INVALID_REQUEST, as Kafka answers. In a cluster only the
// controller answers; other nodes say NOT_COORDINATOR.
func initTransactional(c *conn, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) (reply, error) {
	switch {
	case *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
		return msg(resp)
	case !c.mayIdempotent():
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return msg(resp)
	}
	expect := broker.TxnProducer{ID: -1, Epoch: -1}
	if req.Version >= 3 && req.ProducerID >= 0 {
		expect = broker.TxnProducer{ID: req.ProducerID, Epoch: req.ProducerEpoch}
	}
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	id, err := c.s.b.InitTransactionalProducer(*req.TransactionalID, timeout, expect)
	if err != nil {
		resp.ErrorCode = errCode(err, nil)
		return msg(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id.ID, id.Epoch
	return msg(resp)
}
