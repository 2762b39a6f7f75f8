package broker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
)

// cursorTimeout bounds one cursor create or delete the reconciler proposes.
const cursorTimeout = 5 * time.Second

// reconcileCursors gives every partition this node leads a cursor for each subscription
// its topic has in the catalog, and removes the cursors of subscriptions the catalog no
// longer has. Only the leader proposes (a follower's proposal would be NOT_LEADER); a
// create that lost a race with another leader's is refused by apply as ErrCursorExists,
// harmlessly. A failure is retried at the next round.
func (c *clusterRT) reconcileCursors() {
	st := c.meta.State()
	for _, name := range sortedTopicNames(st) {
		ct := st.Topics[name]
		subs, err := subsOf(ct)
		if err != nil {
			c.log.Warn("cluster: subscriptions of a topic unreadable in the catalog", "topic", name, "err", err)
			continue
		}
		t, err := c.b.streams.topic(name)
		if err != nil {
			continue // not created here yet: the topic's reconcile does it
		}
		ts, parts := t.snapshot()
		for _, p := range parts {
			if err := c.reconcilePartitionCursors(ts, ct, p, subs); err != nil {
				c.log.Warn("cluster: subscription cursors not yet in step with the catalog; retrying", "topic", name,
					"partition", p.index, "err", err)
			}
		}
	}
}

func (c *clusterRT) reconcilePartitionCursors(ts TopicSettings, ct *meta.Topic, p *partitionRT, subs map[string]SubscriptionSettings) error {
	h := p.repl.Load()
	if h == nil || h.sm == nil {
		return nil
	}
	c.moveAllSubDeadLetters(p, subs) // cluster_subs_dlq.go
	// In step already (nearly always, and always for a partition whose topic has no
	// subscription): done without asking raft who leads, which copies the group's
	// progress and was a third of an idle node's CPU with 1,000 partitions.
	if len(subs) == 0 && h.sm.CursorCount() == 0 {
		return nil
	}
	have := h.sm.CursorIDs()
	inStep := len(have) == len(subs)
	for _, s := range subs {
		inStep = inStep && slices.Contains(have, s.ID)
	}
	if inStep {
		return nil
	}
	if leader, _ := h.part.Leader(); leader != c.node {
		return nil
	}
	ids := map[uint64]bool{}
	var errs []error
	for _, s := range subs {
		ids[s.ID] = true
		if slices.Contains(have, s.ID) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), cursorTimeout)
		err := h.part.CreateCursor(ctx, s.ID, subCursorConfig(s, ts))
		cancel()
		if err != nil && !errors.Is(err, replpart.ErrCursorExists) {
			errs = append(errs, err)
		}
	}
	for _, sub := range have {
		if ids[sub] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), cursorTimeout)
		err := h.part.DeleteCursor(ctx, sub)
		cancel()
		if err != nil && !errors.Is(err, replpart.ErrCursorNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// subCursorConfig is a subscription's cursor in a partition's group. Its receive limit is
// not in it: each limited Receive carries the redrive policy's (cluster_subs_dlq.go).
func subCursorConfig(s SubscriptionSettings, ts TopicSettings) replpart.CursorConfig {
	q := s.cursorConfig(ts)
	q.MaxReceives = 0
	return replpart.CursorConfig{Queue: q, Delay: s.DeliveryDelay, FromEarliest: s.FromEarliest}
}

// Bounds and Records make the replica's log a replpart.RecordLog: what a subscription's
// cursor reads in apply. Every replica's local log holds exactly the applied entries'
// records, so the same reads answer the same metas everywhere. Transactions are refused
// in a cluster, so there is no last stable offset to wait at: the high watermark is it.
func (r *replicaLog) Bounds() (int64, int64) {
	return r.p.log.LogStartOffset(), r.p.log.HighWatermark()
}

func (r *replicaLog) Records(from int64, maxRecs int) ([]replpart.RecordMeta, int64, error) {
	log := r.p.log
	data, err := log.Read(from, fillReadBytes)
	if err != nil {
		return nil, from, err
	}
	var out []replpart.RecordMeta
	next := from
	err = eachRecord(data, func(rec batch.Record) bool {
		if rec.Offset < from {
			return true
		}
		if len(out) == maxRecs {
			return false
		}
		out = append(out, replpart.RecordMeta{Offset: rec.Offset, Timestamp: rec.Timestamp,
			Key: rec.Key, HasKey: rec.Key != nil})
		next = rec.Offset + 1
		return true
	})
	if err != nil {
		return nil, from, err
	}
	if len(out) == 0 && next <= from && from < log.HighWatermark() {
		// Nothing readable here (a damaged range quarantined on this replica): past it.
		next = log.SkipDamaged(from)
	}
	return out, next, nil
}
