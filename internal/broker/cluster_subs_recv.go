package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/queue"
)

// subPollEvery is how often a long poll of a replicated subscription looks again at the
// cursors it waits on (a produce applied here does not wake it; the replica is read, not
// changed, so a look costs no entry).
const subPollEvery = 100 * time.Millisecond

// subReceive receives from the partitions of a replicated subscription this node leads.
// Partitions led elsewhere are served by their leaders: when this node leads none, or
// those it leads have nothing to deliver while another's replica here shows records
// waiting, the call answers NOT_LEADER naming that partition's leader (the front-ends
// forward it there, once).
func (c *clusterRT) subReceive(ctx context.Context, topic, name string, opts ReceiveOptions) ([]SubscriptionDelivery, error) {
	s, err := c.subscription(topic, name)
	if err != nil {
		return nil, err
	}
	t, err := c.b.streams.topic(topic)
	if err != nil {
		return nil, err
	}
	if opts.Max == 0 {
		opts.Max = 1
	}
	if opts.Max < 0 || opts.Max > min(MaxReceiveBatch, replcursor.MaxReceive) {
		return nil, invalid("max", "%d: want 1 to %d", opts.Max, min(MaxReceiveBatch, replcursor.MaxReceive))
	}
	if opts.Visibility < 0 || opts.Visibility > MaxVisibility {
		return nil, invalid("visibility", "%v: want 0 to %v", opts.Visibility, MaxVisibility)
	}
	var timeout <-chan time.Time
	if opts.Wait > 0 {
		tm := time.NewTimer(opts.Wait)
		defer tm.Stop()
		timeout = tm.C
	}
	for {
		out, elsewhere, err := c.subReceiveOnce(ctx, t, s, opts)
		if err != nil || len(out) > 0 {
			return out, err
		}
		if elsewhere != nil {
			return nil, elsewhere
		}
		if opts.Wait <= 0 {
			return nil, nil
		}
		if !waitForWork(ctx, nil, c.b.now().Add(subPollEvery), c.b.now(), timeout) {
			return nil, ctx.Err()
		}
	}
}

// subReceiveOnce proposes a Receive to each partition led here whose cursor has something
// to deliver, until opts.Max. With nothing delivered, elsewhere is the NOT_LEADER to
// answer if a partition led elsewhere (or by nobody known) shows records waiting, or this
// node leads none of the topic's partitions.
func (c *clusterRT) subReceiveOnce(ctx context.Context, t *topicRT, s SubscriptionSettings, opts ReceiveOptions) ([]SubscriptionDelivery, error, error) {
	_, parts := t.snapshot()
	now := c.b.now()
	var out []SubscriptionDelivery
	var elsewhere error
	led := 0
	start := int(c.subNext.Add(1) % uint64(max(1, len(parts))))
	for i := range parts {
		p := parts[(start+i)%len(parts)]
		h := p.repl.Load()
		if h == nil {
			continue
		}
		leader, _ := h.part.Leader()
		ready, _ := h.sm.CursorReady(s.ID, now)
		if leader != c.node {
			if elsewhere == nil && (ready || led == 0) {
				elsewhere = c.notLeader(p, int32(leader))
			}
			continue
		}
		led++
		if !ready || len(out) >= opts.Max {
			continue
		}
		ds, err := c.subReceivePartition(ctx, p, h, s, opts.Max-len(out), opts.Visibility)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, ds...)
	}
	if led > 0 && elsewhere != nil && !c.elsewhereReady(parts, s, now) {
		elsewhere = nil // nothing waits elsewhere: wait here
	}
	return out, elsewhere, nil
}

// elsewhereReady reports whether a partition led by another node shows records waiting on
// its replica here.
func (c *clusterRT) elsewhereReady(parts []*partitionRT, s SubscriptionSettings, now time.Time) bool {
	for _, p := range parts {
		h := p.repl.Load()
		if h == nil {
			continue
		}
		if leader, _ := h.part.Leader(); leader == c.node {
			continue
		}
		if ready, _ := h.sm.CursorReady(s.ID, now); ready {
			return true
		}
	}
	return false
}

// subReceivePartition proposes one Receive and joins its deliveries with the records,
// read from this leader's local log (it applied them before the Receive).
func (c *clusterRT) subReceivePartition(ctx context.Context, p *partitionRT, h *hostedReplica, s SubscriptionSettings, n int, vis time.Duration) ([]SubscriptionDelivery, error) {
	rctx, cancel := context.WithTimeout(ctx, replTimeout)
	var ds []queue.Delivery
	var err error
	if s.DeadLetterQueue != "" && s.MaxReceives > 0 {
		ds, err = h.part.ReceiveLimited(rctx, s.ID, n, vis, s.MaxReceives) // cluster_subs_dlq.go
	} else {
		ds, err = h.part.Receive(rctx, s.ID, n, vis)
	}
	cancel()
	if errors.Is(err, replpart.ErrCursorNotFound) {
		return nil, nil // the reconciler has not given the partition its cursor yet
	}
	if err != nil {
		return nil, c.subErr(p, err)
	}
	offs := make([]int64, len(ds))
	for i, d := range ds {
		offs[i] = d.Offset
	}
	recs, err := readRecords(p, offs)
	if err != nil {
		return nil, err
	}
	out := make([]SubscriptionDelivery, 0, len(ds))
	for _, d := range ds {
		r, ok := recs[d.Offset]
		if !ok {
			continue // lost to a damaged batch here; delivered again after its visibility
		}
		out = append(out, SubscriptionDelivery{Partition: p.index, Offset: d.Offset, Key: r.Key, Value: r.Value,
			Headers: r.Headers, Timestamp: time.UnixMilli(r.Timestamp),
			Receipt: c.subReceipt(s.ID, p.index, d.Offset, d.FencingToken, d.Receipt), ReceiveCount: d.ReceiveCount,
			FirstReceivedAt: d.FirstReceivedAt, Deadline: d.Deadline, FencingToken: d.FencingToken})
	}
	return out, nil
}

// subLease runs one receipt operation on the leader of the receipt's partition.
func (c *clusterRT) subLease(ctx context.Context, topic, name, receipt string, op replcursor.Op) error {
	s, err := c.subscription(topic, name)
	if err != nil {
		return err
	}
	pi, r, err := c.openSubReceipt(s.ID, receipt)
	if err != nil {
		return err
	}
	_, p, err := c.b.streams.partition(topic, pi)
	if err != nil {
		return ErrReceiptInvalid
	}
	h := p.repl.Load()
	if h == nil {
		return c.notLeader(p, 0)
	}
	if leader, _ := h.part.Leader(); leader != c.node {
		return c.notLeader(p, int32(leader))
	}
	op.Receipt = r
	rctx, cancel := context.WithTimeout(ctx, replTimeout)
	defer cancel()
	switch op.Kind {
	case replcursor.Ack:
		err = h.part.Ack(rctx, s.ID, r)
	case replcursor.Nack:
		err = h.part.Nack(rctx, s.ID, r, op.Delay)
	case replcursor.Extend:
		err = h.part.Extend(rctx, s.ID, r, op.Timeout)
	}
	err = c.subErr(p, err)
	if errors.Is(err, ErrReceiptStale) {
		h.countStale(s.ID)
	}
	return err
}

// subErr maps replpart's answers to the broker's.
func (c *clusterRT) subErr(p *partitionRT, err error) error {
	var nl *replpart.NotLeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nl):
		return c.notLeader(p, int32(nl.Leader))
	case errors.Is(err, multiraft.ErrProposalDropped):
		return c.notLeader(p, 0)
	case errors.Is(err, replpart.ErrOutcomeUnknown):
		return fmt.Errorf("%w: %w", ErrReplicationUnknown, err)
	case errors.Is(err, replpart.ErrCursorNotFound):
		return fmt.Errorf("%w: the subscription has no cursor in partition %d yet", ErrReceiptStale, p.index)
	case errors.Is(err, queue.ErrReceiptInvalid):
		return ErrReceiptInvalid
	}
	return mapCursorErr(err)
}

// subLeaseBatch runs op for each receipt; each gets its own result. A receipt of a
// partition led elsewhere is that receipt's NOT_LEADER, unless none is led here: then the
// call's, so the front-end forwards the whole batch to the first one's leader.
func (c *clusterRT) subLeaseBatch(ctx context.Context, topic, name string, receipts []string, op replcursor.Op) ([]error, error) {
	out := make([]error, len(receipts))
	allElsewhere := len(receipts) > 0
	var first error
	for i, r := range receipts {
		out[i] = c.subLease(ctx, topic, name, r, op)
		var nl *NotLeaderError
		if errors.As(out[i], &nl) {
			if first == nil {
				first = out[i]
			}
			continue
		}
		if errors.Is(out[i], ErrSubscriptionNotFound) || errors.Is(out[i], ErrTopicNotFound) {
			return nil, out[i]
		}
		allElsewhere = false
	}
	if allElsewhere && first != nil {
		return nil, first
	}
	return out, nil
}
