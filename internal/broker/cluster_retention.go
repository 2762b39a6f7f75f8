package broker

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/replpart"
)

// Retention of a replicated partition (docs/cluster.md, "Retention in a cluster").
//
// A replica never cuts its log by its own clock: the partition's leader computes the
// retention cut and proposes it as a trim entry (replpart's trim.go, DeleteRecords' entry),
// and every replica moves its log start there at the same point of the group's log. A
// replica that cut on its own — each at its own moment, by its own segments — would serve
// other records than its peers, and its subscriptions' cursors, which read the local log
// as receives apply, would lease other records than the leader's: an ack answered by the
// leader could then miss on a replica that later leads, and the acked record be delivered
// again. The segments below a moved start are deleted once a snapshot whose checkpoint
// names it is stored (replicaLog.CheckpointStored), never before: after a crash the
// entries after the last stored snapshot are applied again and must read what they read
// the first time.

// retentionTrimTimeout bounds one retention trim's wait for its entry to apply; a
// trim that times out is proposed again by a later pass if the cut still stands.
const retentionTrimTimeout = 30 * time.Second

// retainReplicated is retention on a partition of a catalog topic: on its leader, the cut
// is proposed when it passes the log start; elsewhere nothing (the leader's trim reaches
// every replica, and a partition this node does not host holds nothing it must cut).
func (t *topicRT) retainReplicated(p *partitionRT, s TopicSettings) {
	c := t.s.b.cluster
	h := p.repl.Load()
	if h == nil {
		return
	}
	t.expireIdleProducers(p, h) // cluster_producer_expiry.go
	// The cut first: nearly every pass finds nothing to cut, and asking raft who leads
	// copies the group's progress on a leader (an idle node of a thousand partitions
	// would pay that every second for each).
	cut := t.replicatedCut(p, h, s)
	if cut <= p.log.LogStartOffset() {
		return
	}
	if leader, _ := h.part.Leader(); leader != c.node || !p.trimming.CompareAndSwap(false, true) {
		return
	}
	started := c.background(func(bg context.Context) {
		defer p.trimming.Store(false)
		ctx, cancel := context.WithTimeout(bg, retentionTrimTimeout)
		defer cancel()
		_, err := h.part.Trim(ctx, cut)
		switch {
		case err == nil, errors.Is(err, replpart.ErrNotLeader), bg.Err() != nil:
			// Done, or another node leads now (its own pass proposes), or closing.
		default:
			c.log.Warn("cluster: retention trim not applied; the next pass proposes it again",
				"topic", p.topic, "partition", p.index, "cut", cut, "err", err)
		}
	})
	if !started {
		p.trimming.Store(false)
	}
}

// replicatedCut is where the leader's retention would start the partition: the time
// cut (which expires subscription records too, as on a single node), the size cut held
// at the subscriptions' lowest unfinished offset (a single node's rule: below the size
// limit a subscription keeps what it has not finished), rounded down to the first offset
// of one of the leader's segments. Retention deletes whole segments; rounding keeps the
// trims as rare as that (the time cut moves with every record, a trim costs a snapshot
// on every replica), and a replica whose segments roll elsewhere simply starts inside
// one of its own.
func (t *topicRT) replicatedCut(p *partitionRT, h *hostedReplica, s TopicSettings) int64 {
	start := p.log.LogStartOffset()
	timeCut, cut := t.retentionCut(p, s)
	if cut <= start {
		return start
	}
	// The cursors' floors only rise as entries apply, so a cut below them now is below
	// them when the trim applies.
	if floor, ok := h.sm.CursorFloor(); ok {
		cut = min(cut, floor)
	}
	cut = max(cut, timeCut)
	aligned := start
	bases, _ := p.log.SegmentSizes()
	for _, base := range bases {
		if base <= cut {
			aligned = max(aligned, base)
		}
	}
	return aligned
}
