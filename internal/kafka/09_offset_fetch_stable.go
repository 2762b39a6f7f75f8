package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleOffsetFetchStable is OffsetFetch with KIP-447's require_stable
// (v7+): a partition whose offset a transaction not yet complete is about
// to set answers UNSTABLE_OFFSET_COMMIT, which clients retry; a consumer
// taking the partition over from a transactional processor so starts
// after the transaction's offsets, never before them (which would process
// its input twice).
func handleOffsetFetchStable(ctx context.Context, c *conn, req *kmsg.OffsetFetchRequest) (reply, error) {
	rep, err := handleOffsetFetch(ctx, c, req)
	if err != nil || !req.RequireStable || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.OffsetFetchResponse)
	unstable := kerr.UnstableOffsetCommit.Code
	if req.Version >= 8 {
		for gi := range resp.Groups {
			g := &resp.Groups[gi]
			for ti := range g.Topics {
				t := &g.Topics[ti]
				for pi := range t.Partitions {
					p := &t.Partitions[pi]
					if p.ErrorCode == 0 && c.s.b.PendingTxnOffset(g.Group, t.Topic, p.Partition) {
						p.ErrorCode, p.Offset = unstable, -1
					}
				}
			}
		}
		return rep, nil
	}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode == 0 && c.s.b.PendingTxnOffset(req.Group, t.Topic, p.Partition) {
				p.ErrorCode, p.Offset = unstable, -1
			}
		}
	}
	return rep, nil
}
