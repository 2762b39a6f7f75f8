package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleEndTxn commits or aborts the producer's transaction. The answer
// comes once the decision is durable and, normally, once the markers are
// in every partition and the offsets in their groups (the coordinator's
// WriteTxnMarkers step runs inside this call, not as a request to other
// brokers: there are none). A retried EndTxn of a transaction already
// complete in the same direction succeeds; CONCURRENT_TRANSACTIONS while
// markers are still pending (after a failure) tells the client to retry.
//
// v5 (KIP-890 part 2) bumps the epoch at the end of every transaction, in
// the same durable step as the decision, and answers the producer id and
// epoch of the next one (a new id at epoch 0 when the epochs run out); an
// abort with nothing open succeeds and bumps too, and a commit the
// coordinator's timeout beat answers TRANSACTION_ABORTABLE (txn.EndTxnBump).
func handleEndTxn(_ context.Context, c *conn, req *kmsg.EndTxnRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if !c.mayIdempotent() {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return msg(resp)
	}
	if req.Version < 5 {
		resp.ErrorCode = errCode(c.s.b.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), nil)
		return msg(resp)
	}
	next, err := c.s.b.EndTxnBump(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	if resp.ErrorCode = errCode(err, nil); err == nil {
		resp.ProducerID, resp.ProducerEpoch = next.ID, next.Epoch
	}
	return msg(resp)
}
