package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleAddOffsetsToTxn adds a consumer group to the producer's
// transaction, so that its TxnOffsetCommit is applied at commit (Kafka
// adds the group's __consumer_offsets partition; sluice has none, the
// group is the unit). It needs consume on the group, as Kafka needs READ.
// v4 answers TRANSACTION_ABORTABLE to a producer whose transaction the
// coordinator aborted at its timeout; older versions PRODUCER_FENCED.
func handleAddOffsetsToTxn(_ context.Context, c *conn, req *kmsg.AddOffsetsToTxnRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !c.mayIdempotent():
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !c.may(auth.Consume, auth.Group, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	case req.Version >= 4: // knows TRANSACTION_ABORTABLE (KIP-890)
		resp.ErrorCode = errCode(c.s.b.AddOffsetsToTxnAbortable(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group), nil)
	default:
		resp.ErrorCode = errCode(c.s.b.AddOffsetsToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group), nil)
	}
	return msg(resp)
}
