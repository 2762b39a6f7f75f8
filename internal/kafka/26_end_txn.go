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
// v5 (KIP-890 part 2, an epoch bump per transaction) is not served.
func handleEndTxn(_ context.Context, c *conn, req *kmsg.EndTxnRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !c.mayIdempotent() {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return msg(resp)
	}
	resp.ErrorCode = errCode(c.s.b.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), nil)
	return msg(resp)
}
