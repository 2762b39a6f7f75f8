package broker

import (
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/producer"
)

// Idle producers in a replicated partition (docs/cluster.md, "Idle producers are forgotten
// by an entry"): a partition forgets an idempotent producer that wrote nothing to it for
// Options.ProducerIDExpiration (Kafka's producer.id.expiration.ms), as a single node does
// in its maintenance pass (topic_retention.go). Every replica decides duplicates and gaps
// from its producers' state, so none may forget by its own clock: the leader proposes a
// forget entry (replpart/forget.go) and every replica applies it at the same point of the
// log.

var _ replpart.ProducerForgetter = (*replicaLog)(nil)

// ForgetProducers applies a forget entry: the listed producers whose last batch is still
// the one listed are forgotten (producer.State.Forget), and so are their last transaction
// markers once old enough (txnPartition.forgetMarkers), on every replica alike.
func (r *replicaLog) ForgetProducers(ps []replpart.IdleProducer) error {
	idle := make([]producer.Idle, len(ps))
	for i, p := range ps {
		idle[i] = producer.Idle{ID: p.ID, LastBase: p.LastBase}
	}
	forgotten := r.p.prod.Forget(idle)
	r.b.producersExpired.Add(uint64(len(forgotten)))
	r.p.txn.forgetMarkers(forgotten)
	return nil
}

// expireIdleProducers is the expiry pass of a replicated partition (producer/expire.go):
// every replica stamps its producers with the pass's time, and the leader proposes
// forgetting the ones idle by its clock. Nothing is forgotten here: the entry is, on every
// replica at the same point of the log. Below meta.LevelProducerExpiry the entry is
// refused and nothing expires.
func (t *topicRT) expireIdleProducers(p *partitionRT, h *hostedReplica) {
	b := t.s.b
	idle := p.prod.IdleSince(b.now(), b.opts.ProducerIDExpiration, p.txn.hasOpen)
	if len(idle) == 0 {
		return
	}
	if leader, _ := h.part.Leader(); leader != b.cluster.node {
		return
	}
	for len(idle) > 0 {
		n := min(len(idle), replpart.MaxForgetProducers)
		ps := make([]replpart.IdleProducer, n)
		for i, x := range idle[:n] {
			ps[i] = replpart.IdleProducer{ID: x.ID, LastBase: x.LastBase}
		}
		idle = idle[n:]
		if err := h.part.Forget(ps); err != nil {
			b.log.Debug("cluster: idle producers not forgotten; the leader's next pass proposes them again",
				"topic", p.topic, "partition", p.index, "producers", n, "err", err)
			return
		}
	}
}
