package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleInitProducerID gives an idempotent producer a fresh id at epoch 0.
// A producer re-initialising after a sequence error (v3+ sends its old id
// and epoch) also gets a fresh id, which resets its sequences just as an
// epoch bump would. Transactional ids are refused: no transactions yet.
func handleInitProducerID(_ context.Context, c *conn, req *kmsg.InitProducerIDRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
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
