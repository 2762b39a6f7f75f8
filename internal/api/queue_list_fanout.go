package api

import (
	"context"
	"net/http"
	"sync"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// ListQueues in a cluster. A queue's stats are its leader's (broker.QueueStats answers
// NOT_LEADER elsewhere), and the queues of a page are led by several nodes, so a listing
// made on one node failed NOT_LEADER as soon as the queues had more than one leader
// (`sluice queue list` on any cluster of more than one queue). As a Fetch is fanned out
// (topic_fanout.go), the node describes what it leads and asks each queue's leader for
// the others — a GetQueue sub-call per queue, with the caller's identity, a few at a time —
// and answers the page in its order. Where it may not fan out (a call that arrived
// forwarded), the NOT_LEADER stands, as before.

// listFanOut bounds the GetQueue sub-calls of one listing in flight at once.
const listFanOut = 8

// describeAll describes names in order. A queue led elsewhere is asked of its leader when
// the call may fan out; one deleted meanwhile is left out.
func (q *queueService) describeAll(ctx context.Context, hdr http.Header, names []string) ([]*sluicev1.Queue, error) {
	out := make([]*sluicev1.Queue, len(names))
	errs := make([]error, len(names))
	remote := map[int]int32{} // position -> leader
	for i, n := range names {
		qp, err := q.describeQueue(n)
		if l := notLeader(err); l != 0 && q.fanOut(ctx) {
			remote[i] = l
			continue
		}
		out[i], errs[i] = qp, err
	}
	if len(remote) > 0 {
		sem := make(chan struct{}, listFanOut)
		var wg sync.WaitGroup
		for i, leader := range remote {
			peer, ok := q.peerQueues(ctx, leader)
			if !ok {
				_, errs[i] = q.describeQueue(names[i]) // its NOT_LEADER, as before
				continue
			}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				sctx, cancel := context.WithTimeout(ctx, subCallSlack)
				defer cancel()
				res, err := peer.GetQueue(sctx, subRequest(ctx, q.API, leader, &sluicev1.GetQueueRequest{Name: names[i]}, hdr))
				if err != nil {
					errs[i] = err
					return
				}
				out[i] = res.Msg.GetQueue()
			})
		}
		wg.Wait()
	}
	kept := out[:0]
	for i, qp := range out {
		switch {
		case connect.CodeOf(errs[i]) == connect.CodeNotFound:
			// deleted between the listing and now
		case errorInfoOf(errs[i]).GetReason() == ReasonQueueUnavailable:
			// One damaged queue does not hide the others: it is listed, saying why.
			kept = append(kept, &sluicev1.Queue{Name: names[i], Unavailable: connectMessage(errs[i])})
		case errs[i] != nil:
			return nil, errs[i]
		case qp != nil:
			kept = append(kept, qp)
		}
	}
	return kept, nil
}

// peerQueues is a QueueService client of node for the call of ctx (peerClient).
func (a *API) peerQueues(ctx context.Context, node int32) (sluicev1connect.QueueServiceClient, bool) {
	return peerClient(ctx, a, node, sluicev1connect.NewQueueServiceClient)
}
