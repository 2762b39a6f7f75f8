package api

import (
	"context"
	"net/http"
	"slices"
	"sync"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// ListRedrives in a cluster. A redrive runs on the node that led its dead-letter queue when
// it started and is saved there (the broker's cluster_queues_redrive.go): a listing made on
// one node showed that node's tasks only, so `sluice dlq redrive list` found a running task
// or not depending on the node it asked. As ListQueues is (queue_list_fanout.go), the
// listing is fanned out: every other node is asked for its own tasks (a sub-call arrives
// forwarded, so it answers its own and fans out no further), with the caller's identity,
// and the answers are merged, newest first. A node that does not answer in time is left
// out — the listing shows what the cluster could say, as `sluice cluster status` does.

// redrivesEverywhere adds the other nodes' answers to ListRedrives to local.
func (d *deadLetterService) redrivesEverywhere(ctx context.Context, hdr http.Header, req *sluicev1.ListRedrivesRequest, local []*sluicev1.Redrive) []*sluicev1.Redrive {
	var mu sync.Mutex
	out := local
	var wg sync.WaitGroup
	for _, n := range d.b.ClusterNodes() {
		if n.ID == d.b.NodeID() {
			continue
		}
		peer, ok := d.peerDeadLetters(ctx, n.ID)
		if !ok {
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, subCallSlack)
			defer cancel()
			res, err := peer.ListRedrives(sctx, subRequest(ctx, d.API, n.ID, req, hdr))
			if err != nil {
				d.log.Debug("api: a node's redrives left out of a listing", "node", n.ID, "err", err)
				return
			}
			mu.Lock()
			out = append(out, res.Msg.GetRedrives()...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortStableFunc(out, func(a, b *sluicev1.Redrive) int {
		return b.GetStartTime().AsTime().Compare(a.GetStartTime().AsTime())
	})
	return out
}

// peerDeadLetters is a DeadLetterService client of node for the call of ctx (peerClient).
func (a *API) peerDeadLetters(ctx context.Context, node int32) (sluicev1connect.DeadLetterServiceClient, bool) {
	return peerClient(ctx, a, node, sluicev1connect.NewDeadLetterServiceClient)
}
