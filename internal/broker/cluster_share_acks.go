package broker

import (
	"context"
	"errors"
	"sort"

	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
)

// shareSettle applies a share-partition's acknowledgements as the replicated cursor's
// operations: accept (and a gap) an Ack, release a Nack, renew an Extend; reject and a
// release at the delivery limit archive (shareArchive: an Ack, or a DeadLetter when the
// group has a dead-letter queue). Every offset acknowledged must be
// held by the session here (ErrShareRecordState otherwise, and nothing is settled); each
// leaves the session, a renewed one excepted, whatever its proposal's outcome. The batches
// were checked well formed (ShareFetch).
func (c *clusterRT) shareSettle(ctx context.Context, group string, cfg ShareConfig, s *shareSession, sp SharePartition, bs []ShareAckBatch) error {
	p, h, sub, err := c.shareLeader(sp, group)
	if err != nil {
		return err
	}
	acks, err := planAcks(s.held[sp], bs)
	if err != nil {
		return err
	}
	var accept, archive, release, renew []string
	for _, a := range acks {
		switch {
		case a.typ == ShareAckRelease && a.h.count < cfg.DeliveryLimit:
			release = append(release, a.h.receipt)
		case a.typ == ShareAckRenew:
			renew = append(renew, a.h.receipt)
		case a.typ == ShareAckReject, a.typ == ShareAckRelease: // released at the limit
			archive = append(archive, a.h.receipt)
		default: // gap, accept: finished for good
			accept = append(accept, a.h.receipt)
		}
		if a.typ != ShareAckRenew {
			delete(s.held[sp], a.off)
		}
	}
	var errs []error
	errs = append(errs, c.cursorOps(ctx, h, sub.ID, accept, replcursor.Op{Kind: replcursor.Ack})...)
	errs = append(errs, c.shareArchive(ctx, p, h, sub, cfg, archive)...)
	errs = append(errs, c.cursorOps(ctx, h, sub.ID, release, replcursor.Op{Kind: replcursor.Nack})...)
	errs = append(errs, c.cursorOps(ctx, h, sub.ID, renew, replcursor.Op{Kind: replcursor.Extend, Timeout: cfg.LockDuration})...)
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		err = c.subErr(p, err)
		if errors.Is(err, ErrReceiptStale) || errors.Is(err, ErrReceiptInvalid) {
			// The lock ran out and the record went to another member (or was finished
			// through another API): Kafka's INVALID_RECORD_STATE.
			err = ErrShareRecordState
		}
		if first == nil || errors.Is(first, ErrShareRecordState) {
			first = err // a NOT_LEADER or an unknown outcome says more than a stale record
		}
	}
	return first
}

// shareReleaseHeld makes records a session held of a share-partition available again, if
// this node still leads it (otherwise their locks run out on the next leader).
func (c *clusterRT) shareReleaseHeld(group string, sp SharePartition, receipts []string) {
	if len(receipts) == 0 {
		return
	}
	p, h, sub, err := c.shareLeader(sp, group)
	if err != nil {
		return
	}
	for _, err := range c.cursorOps(context.Background(), h, sub.ID, receipts, replcursor.Op{Kind: replcursor.Nack}) {
		if err != nil && !errors.Is(c.subErr(p, err), ErrReceiptStale) {
			c.log.Debug("cluster: releasing a closed share session's records", "group", group, "topic", sp.Topic,
				"partition", sp.Partition, "err", err)
		}
	}
}

// releaseClusterSession releases everything a session holds: the member closed it, opened
// another, or its connection closed.
func (c *clusterRT) releaseClusterSession(group string, s *shareSession) {
	for sp, held := range s.held {
		rs := make([]string, 0, len(held))
		for _, h := range held {
			rs = append(rs, h.receipt)
		}
		c.shareReleaseHeld(group, sp, rs)
	}
	s.held = map[SharePartition]map[int64]shareHeld{}
}

// shareGroupTopics lists the catalog topics the group has a subscription of.
func (c *clusterRT) shareGroupTopics(group string) []string {
	var out []string
	for name, ct := range c.meta.State().Topics {
		if subs, err := subsOf(ct); err == nil {
			if _, ok := subs[group]; ok {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// shareGroupOffsets reports a share group's start offsets of a catalog topic from the
// replicated cursors, as this node's replicas hold them (a follower's lag behind its
// leader's). A partition with no replica or no cursor here reports start and lag -1
// (Kafka's "no state").
func (c *clusterRT) shareGroupOffsets(group, topic string) ([]SharePartitionOffset, error) {
	s, err := c.subscription(topic, group)
	if err != nil {
		return nil, err
	}
	t, err := c.b.streams.topic(topic)
	if err != nil {
		return nil, err
	}
	_, parts := t.snapshot()
	out := make([]SharePartitionOffset, len(parts))
	for i, p := range parts {
		out[i] = SharePartitionOffset{Partition: int32(i), Start: -1, Lag: -1}
		h := p.repl.Load()
		if h == nil || h.sm == nil {
			continue
		}
		if start, lag, ok := h.sm.CursorStart(s.ID, p.log.HighWatermark()); ok {
			out[i].Start, out[i].Lag = start, lag
		}
	}
	return out, nil
}

// shareSubscriptionNames are the names of every catalog subscription: in a cluster a share
// group without members exists while a subscription is named after it (share_list.go).
func (c *clusterRT) shareSubscriptionNames() []string {
	seen := map[string]bool{}
	for _, ct := range c.meta.State().Topics {
		subs, err := subsOf(ct)
		if err != nil {
			continue
		}
		for name := range subs {
			seen[name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
