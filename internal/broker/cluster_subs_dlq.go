package broker

// Dead-letter queues of replicated subscriptions (docs/cluster.md, "Subscriptions", its
// "Dead-letter queue"): the queues' three steps (cluster_queues_dlq.go) with the
// partition's group as the source.
//
//  1. a receive through a subscription with a redrive policy is a limited Receive in each
//     partition's group (replpart cursor_dead.go): a record received more than
//     MaxReceives times is finished in the cursor and kept among its dead letters;
//  2. the partition's leader reads the record from its local log and Puts a copy into the
//     dead-letter queue's group (its leader: here, or through a multiraft request) under
//     the key "s<partition group>.<subscription>.<offset>", remembered for the queue's
//     deduplication window;
//  3. once the Put is committed, a DeadDone in the partition's group drops the offsets.
//
// A crash or a failover before 2 commits leaves the offset among the dead letters (the
// next leader copies it); between 2 and 3 in both, and the next leader's copy is answered
// as a duplicate by the key. At least once, never lost, as the queues'.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
)

// subMoveHook, when set (tests), runs between a move's steps 2 and 3 ("copied") and may
// stop it there, as a crash would.
var subMoveHook atomic.Pointer[func(stage string, p *partitionRT) bool]

// subCopyKey is the dedup key of the copy of a subscription's record: the same for every
// retry of one move, distinct from a queue's copies ("c…").
func subCopyKey(g multiraft.GroupID, sub uint64, off int64) string {
	return "s" + strconv.FormatUint(uint64(g), 10) + "." + strconv.FormatUint(sub, 10) + "." + strconv.FormatInt(off, 10)
}

// moveAllSubDeadLetters starts a mover for every partition led here whose subscriptions'
// cursors hold dead letters: after a failover the new leader finishes what the old began.
// Called by the reconciler with the topic's catalog subscriptions.
func (c *clusterRT) moveAllSubDeadLetters(p *partitionRT, subs map[string]SubscriptionSettings) {
	h := p.repl.Load()
	if h == nil || h.sm == nil || h.movingDead.Load() {
		return
	}
	var waiting []SubscriptionSettings
	for _, s := range subs {
		if h.sm.DeadCount(s.ID) > 0 {
			waiting = append(waiting, s)
		}
	}
	if len(waiting) == 0 {
		return
	}
	if leader, _ := h.part.Leader(); leader != c.node || !h.movingDead.CompareAndSwap(false, true) {
		return
	}
	if !c.background(func(ctx context.Context) {
		defer h.movingDead.Store(false)
		for _, s := range waiting {
			for {
				n, err := c.moveSubDeadRound(ctx, p, h, s)
				if err != nil {
					c.log.Debug("cluster: a subscription's dead-letter move will be retried", "topic", p.topic,
						"partition", p.index, "subscription", s.Name, "err", err)
					break
				}
				if n == 0 {
					break
				}
			}
		}
	}) {
		h.movingDead.Store(false)
	}
}

// moveSubDeadRound copies up to moveBatch dead letters of subscription s in partition p to
// its dead-letter queue and drops them; it returns how many.
func (c *clusterRT) moveSubDeadRound(ctx context.Context, p *partitionRT, h *hostedReplica, s SubscriptionSettings) (int, error) {
	dead := h.sm.DeadLetters(s.ID, moveBatch)
	if len(dead) == 0 {
		return 0, nil
	}
	target := s.DeadLetterQueue
	if target == "" { // a share group's rejects (cluster_share.go's shareArchive)
		if cfg, ok := c.shareConfig(s.Name); ok {
			target = cfg.DeadLetterQueue
		}
	}
	if target == "" {
		return 0, fmt.Errorf("neither a redrive policy nor a share group's dead-letter queue: %d dead letters wait for one", len(dead))
	}
	ts, err := c.getQueue(target)
	if err != nil {
		return 0, err
	}
	offs := make([]int64, len(dead))
	for i, d := range dead {
		offs[i] = d.Offset
	}
	recs, err := readRecords(p, offs)
	if err != nil {
		return 0, err
	}
	source := subKey(p.topic, s.Name)
	// From LevelDeadLetterHistory the copy says when the record was produced (what a single
	// node's copy keeps as its send time); the rest of a subscription's history is not kept.
	history := c.meta.State().FeatureLevel() >= meta.LevelDeadLetterHistory
	var msgs []replqueue.Msg
	var copied []int64 // the offsets msgs copy, in order; a record lost here is dropped
	for _, d := range dead {
		r, ok := recs[d.Offset]
		if !ok {
			c.log.Warn("cluster: a dead-lettered record is unreadable here (a damaged batch): dropped",
				"topic", p.topic, "partition", p.index, "offset", d.Offset)
			continue
		}
		sys := map[string]string{"sluice.topic": p.topic, "sluice.partition": strconv.Itoa(int(p.index)),
			"sluice.offset": strconv.FormatInt(d.Offset, 10), "sluice.key": string(r.Key)}
		var attrs map[string]Attribute
		if len(r.Headers) > 0 {
			attrs = make(map[string]Attribute, len(r.Headers))
			for _, hd := range r.Headers {
				attrs[hd.Key] = Attribute{DataType: "Binary", Value: hd.Value}
			}
		}
		m := replqueue.Msg{
			Body: wrapCopy(copyHeader{id: stableID(source, int(p.index), d.Offset), source: source, count: d.ReceiveCount,
				history: history, sentAt: time.UnixMilli(r.Timestamp)},
				encodeEnvelope(attrs, sys, r.Value)),
			Key: subCopyKey(h.group, s.ID, d.Offset),
		}
		if ts.FIFO {
			// A key-ordered subscription's group is the record's key (as its cursor's);
			// a record without one goes in the subscription's own group.
			m.Group, m.DedupID = source, m.Key
			if r.Key != nil && s.KeyOrdered {
				m.Group = string(r.Key)
			}
		}
		msgs = append(msgs, m)
		copied = append(copied, d.Offset)
	}
	pctx, cancel := context.WithTimeout(ctx, replTimeout)
	defer cancel()
	n, perr := c.putChunked(pctx, target, msgs, max(copyWindow, dedupWindow(ts)))
	if n == 0 && len(msgs) > 0 {
		return 0, fmt.Errorf("copy to dead-letter queue %s: %w", target, perr)
	}
	if hook := subMoveHook.Load(); hook != nil && !(*hook)("copied", p) {
		return 0, errors.New("stopped by the test hook")
	}
	// The copied prefix, and the unreadable records among it (nothing to copy).
	done := offs
	if n < len(msgs) {
		done = offs[:indexOf(offs, copied[n])]
	}
	if err := h.part.DeadDone(pctx, s.ID, done); err != nil {
		return 0, c.subErr(p, err)
	}
	if perr != nil {
		return 0, fmt.Errorf("copy to dead-letter queue %s: %w", target, perr)
	}
	return len(done), nil
}

// indexOf is the index of v in s (sorted, v present).
func indexOf(s []int64, v int64) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return len(s)
}
