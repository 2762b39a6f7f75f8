package broker

// Share groups in a cluster (docs/cluster.md, "Share groups").
//
// Membership (ShareGroupHeartbeat, ShareGroupDescribe) lives on the group coordinator, the
// controller, as consumer groups' does: share_groups.go behind CheckCoordinator, its
// members forgotten when the node starts a new term as coordinator (members rejoin).
//
// Share sessions live on each partition's leader, keyed by group and member, and nothing
// checks membership there (nor does Kafka's share-partition leader: what a member that
// left holds, its locks give back). A session serves only partitions its node leads: the
// others answer NOT_LEADER_OR_FOLLOWER and the client finds the leader through Metadata.
//
// Acquire, accept, release, reject and renew are the replicated cursor's Receive, Ack,
// Nack, Ack and Extend (cluster_subs_recv.go): entries of the partition's Raft group,
// answered once committed and applied. So an accepted record is finished on every replica
// before the member hears so and is never delivered again; a record acquired and not yet
// acknowledged is in flight on every replica, and when its lock runs out the next leader
// delivers it again with its delivery count kept (the count is the cursor's). The session
// itself is this node's memory: after the leader moves, the member opens a new session on
// the next leader, and its acknowledgements there of records it acquired from the old one
// are refused (INVALID_RECORD_STATE), as Kafka refuses them: those records come back when
// their locks run out.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/queue"
)

// clusterSession is one member's share session on this node. mu serialises the member's
// requests here (held across their cursor proposals, not across a long poll's waits).
type clusterSession struct {
	mu sync.Mutex
	s  *shareSession // nil: none open
}

// lockSession returns the member's session entry locked, created if absent. The entry is
// still the member's when returned (a close may drop it while a caller waits for its lock).
func (sg *shareGroups) lockSession(key ShareMember) *clusterSession {
	for {
		sg.mu.Lock()
		cs := sg.sessions[key]
		if cs == nil {
			cs = &clusterSession{}
			sg.sessions[key] = cs
		}
		sg.mu.Unlock()
		cs.mu.Lock()
		sg.mu.Lock()
		current := sg.sessions[key] == cs
		sg.mu.Unlock()
		if current {
			return cs
		}
		cs.mu.Unlock()
	}
}

// dropSessionLocked forgets the member's entry if it holds no session. Called with cs.mu held.
func (sg *shareGroups) dropSessionLocked(key ShareMember, cs *clusterSession) {
	if cs.s != nil {
		return
	}
	sg.mu.Lock()
	if sg.sessions[key] == cs {
		delete(sg.sessions, key)
	}
	sg.mu.Unlock()
}

// clusterShareFetch is ShareFetch on a cluster node: share_fetch.go's steps with the
// session this node keeps for the member and the partitions' replicated cursors.
func (b *Broker) clusterShareFetch(ctx context.Context, req ShareFetchRequest) ShareFetchResult {
	if !subNameRE.MatchString(req.Group) {
		return ShareFetchResult{Err: fmt.Errorf("%w: a share group id is a subscription name", ErrInvalidGroupID)}
	}
	cfg := b.ShareGroupConfig(req.Group)
	sg := b.shares()
	key := ShareMember{Group: req.Group, MemberID: req.MemberID}
	cs := sg.lockSession(key)
	s, err := b.clusterSessionLocked(cs, req)
	if err != nil {
		sg.dropSessionLocked(key, cs)
		cs.mu.Unlock()
		return ShareFetchResult{Err: err}
	}
	res := ShareFetchResult{LockDuration: cfg.LockDuration}
	part := resultParts(&res)
	for _, sp := range sortedParts(req.Acks) {
		part(sp).AckErr = b.cluster.shareSettle(ctx, req.Group, cfg, s, sp, req.Acks[sp])
	}
	for _, sp := range req.Forget {
		b.cluster.shareReleaseHeld(req.Group, sp, s.forget(sp))
	}
	if req.SessionEpoch == -1 {
		b.cluster.releaseClusterSession(req.Group, s)
		cs.s = nil
		sg.dropSessionLocked(key, cs)
		cs.mu.Unlock()
		return res
	}
	for _, sp := range req.Add {
		s.add(sp)
	}
	s.bump()
	cs.mu.Unlock()
	if req.NoFetch {
		return res
	}
	b.cluster.shareAcquire(ctx, req, cfg, cs, s, part)
	return res
}

// clusterSessionLocked finds the session for the request's epoch, opening one at 0 (and
// releasing what an earlier one held). Called with cs.mu held.
func (b *Broker) clusterSessionLocked(cs *clusterSession, req ShareFetchRequest) (*shareSession, error) {
	switch {
	case req.SessionEpoch == 0:
		if req.Acknowledge {
			return nil, ErrShareSessionEpoch // as Kafka: ShareAcknowledge cannot open a session
		}
		if len(req.Acks) > 0 {
			return nil, invalid("share_session_epoch", "acknowledgements need an open session (epoch > 0)")
		}
		if cs.s != nil {
			b.cluster.releaseClusterSession(req.Group, cs.s)
		}
		cs.s = &shareSession{conn: req.Conn, held: map[SharePartition]map[int64]shareHeld{}}
	case cs.s == nil:
		return nil, ErrShareSessionNotFound
	case req.SessionEpoch != -1 && req.SessionEpoch != cs.s.epoch:
		return nil, ErrShareSessionEpoch
	}
	return cs.s, nil
}

// clusterShareConnClosed ends the sessions connection conn opened here.
func (b *Broker) clusterShareConnClosed(conn uint64, members []ShareMember) {
	sg := b.shares()
	for _, key := range members {
		sg.mu.Lock()
		_, ok := sg.sessions[key]
		sg.mu.Unlock()
		if !ok {
			continue
		}
		cs := sg.lockSession(key)
		if cs.s != nil && cs.s.conn == conn {
			b.cluster.releaseClusterSession(key.Group, cs.s)
			cs.s = nil
		}
		sg.dropSessionLocked(key, cs)
		cs.mu.Unlock()
	}
}

// shareLeader is a share-partition led here: its partition, replica and the group's
// subscription of the topic; a *NotLeaderError if another node leads it.
func (c *clusterRT) shareLeader(sp SharePartition, group string) (*partitionRT, *hostedReplica, SubscriptionSettings, error) {
	_, p, err := c.b.streams.partition(sp.Topic, sp.Partition)
	if err != nil {
		return nil, nil, SubscriptionSettings{}, err
	}
	h := p.repl.Load()
	if h == nil {
		return nil, nil, SubscriptionSettings{}, c.notLeader(p, 0)
	}
	if leader, _ := h.part.Leader(); leader != c.node {
		return nil, nil, SubscriptionSettings{}, c.notLeader(p, int32(leader))
	}
	s, err := c.subscription(sp.Topic, group)
	var nl *NotLeaderError
	if errors.As(err, &nl) && nl.Catalog {
		// This node's catalog lags the controller's (the coordinator created the
		// subscription a moment ago): nothing to acquire yet, which the client retries;
		// a catalog NOT_LEADER would send it to the controller, which may lead nothing.
		err = fmt.Errorf("%w: %s", ErrSubscriptionNotFound, subKey(sp.Topic, group))
	}
	return p, h, s, err
}

// shareReceive proposes one Receive for the group's share-partition, with the
// subscription's redrive policy if it has one (set natively: cluster_subs_dlq.go).
func (c *clusterRT) shareReceive(ctx context.Context, p *partitionRT, h *hostedReplica, s SubscriptionSettings, n int, lock time.Duration) ([]queue.Delivery, error) {
	rctx, cancel := context.WithTimeout(ctx, replTimeout)
	defer cancel()
	var ds []queue.Delivery
	var err error
	if s.DeadLetterQueue != "" && s.MaxReceives > 0 {
		ds, err = h.part.ReceiveLimited(rctx, s.ID, n, lock, s.MaxReceives)
	} else {
		ds, err = h.part.Receive(rctx, s.ID, n, lock)
	}
	if errors.Is(err, replpart.ErrCursorNotFound) {
		return nil, nil // the leader's reconciler has not given the partition its cursor yet
	}
	return ds, c.subErr(p, err)
}

// shareAcquire acquires up to req.MaxRecords over the session's partitions led here, round
// robin, looking again every subPollEvery up to MaxWait while there are none (a produce
// applied here does not wake a replicated cursor's reader: cluster_subs_recv.go).
func (c *clusterRT) shareAcquire(ctx context.Context, req ShareFetchRequest, cfg ShareConfig, cs *clusterSession, s *shareSession,
	part func(SharePartition) *SharePartitionResult) {
	limit := req.MaxRecords
	if limit <= 0 || limit > MaxShareFetchRecords {
		limit = MaxShareFetchRecords
	}
	deadline := time.Now().Add(req.MaxWait)
	for {
		cs.mu.Lock()
		if cs.s != s {
			cs.mu.Unlock()
			return // the session was closed or replaced meanwhile
		}
		got, failed := c.acquireRound(ctx, req.Group, cfg, s, limit, part)
		cs.mu.Unlock()
		if got > 0 || failed || req.MaxWait <= 0 || !time.Now().Before(deadline) {
			return
		}
		t := time.NewTimer(min(subPollEvery, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// acquireRound tries each session partition once; failed reports a partition answered with
// an error (not led here, say), which the client must see now rather than after MaxWait.
// Called with the session's lock held.
func (c *clusterRT) acquireRound(ctx context.Context, group string, cfg ShareConfig, s *shareSession, limit int,
	part func(SharePartition) *SharePartitionResult) (got int, failed bool) {
	n := len(s.parts)
	now := c.b.now()
	for i := 0; i < n && got < limit; i++ {
		sp := s.parts[(s.next+i)%n]
		p, h, sub, err := c.shareLeader(sp, group)
		r := part(sp)
		if errors.Is(err, ErrSubscriptionNotFound) {
			continue // created through the coordinator, not yet applied here: nothing yet
		}
		if err != nil {
			r.Err, failed = err, true
			continue
		}
		if ready, _ := h.sm.CursorReady(sub.ID, now); !ready {
			continue
		}
		ds, err := c.shareReceive(ctx, p, h, sub, min(limit-got, replcursor.MaxReceive), cfg.LockDuration)
		if err != nil {
			r.Err, failed = err, true
			continue
		}
		ds = c.archiveOverLimit(ctx, p, h, sub, cfg, ds)
		if len(ds) == 0 {
			continue
		}
		sort.Slice(ds, func(a, b int) bool { return ds[a].Offset < ds[b].Offset })
		offs := make([]int64, len(ds))
		for j, d := range ds {
			s.hold(sp, d.Receipt, d)
			offs[j] = d.Offset
			if k := len(r.Acquired) - 1; k >= 0 && r.Acquired[k].Last+1 == d.Offset && r.Acquired[k].DeliveryCount == int16(d.ReceiveCount) {
				r.Acquired[k].Last = d.Offset
				continue
			}
			r.Acquired = append(r.Acquired, ShareAcquired{First: d.Offset, Last: d.Offset, DeliveryCount: int16(d.ReceiveCount)})
		}
		if r.Records, err = shareBatches(p, offs); err != nil {
			r.Err = err
		}
		got += len(ds)
	}
	if n > 0 {
		s.next = (s.next + 1) % n
	}
	return got, failed
}

// archiveOverLimit archives the deliveries past the group's delivery count limit (their
// lock ran out at the limit) and returns the others.
func (c *clusterRT) archiveOverLimit(ctx context.Context, p *partitionRT, h *hostedReplica, s SubscriptionSettings, cfg ShareConfig, ds []queue.Delivery) []queue.Delivery {
	var keep []queue.Delivery
	var over []string
	for _, d := range ds {
		if d.ReceiveCount > cfg.DeliveryLimit {
			over = append(over, d.Receipt)
			continue
		}
		keep = append(keep, d)
	}
	for _, err := range c.shareArchive(ctx, p, h, s, cfg, over) {
		if err != nil {
			// Still in flight: its lock runs out again and the next acquisition retries.
			c.log.Warn("cluster: archiving a share group's record at its delivery limit", "topic", p.topic,
				"partition", p.index, "err", c.subErr(p, err))
			break
		}
	}
	return keep
}

// shareArchive finishes deliveries for good (a reject, a release at the delivery limit, a
// lock that ran out at it): acked, or, with the group's dead-letter queue set, kept among
// the subscription's dead letters, which the leader then copies there (cluster_subs_dlq.go).
func (c *clusterRT) shareArchive(ctx context.Context, p *partitionRT, h *hostedReplica, s SubscriptionSettings, cfg ShareConfig, receipts []string) []error {
	if cfg.DeadLetterQueue == "" {
		return c.cursorOps(ctx, h, s.ID, receipts, replcursor.Op{Kind: replcursor.Ack})
	}
	errs := c.cursorOps(ctx, h, s.ID, receipts, replcursor.Op{Kind: replpart.CursorDeadLetter})
	if slices.Contains(errs, nil) {
		c.moveAllSubDeadLetters(p, map[string]SubscriptionSettings{s.Name: s})
	}
	return errs
}

// cursorOps proposes op for each receipt at once (the group commits them together), and
// returns each one's result.
func (c *clusterRT) cursorOps(ctx context.Context, h *hostedReplica, sub uint64, receipts []string, op replcursor.Op) []error {
	out := make([]error, len(receipts))
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i, r := range receipts {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			rctx, cancel := context.WithTimeout(ctx, replTimeout)
			defer cancel()
			switch op.Kind {
			case replcursor.Ack:
				out[i] = h.part.Ack(rctx, sub, r)
			case replcursor.Nack:
				out[i] = h.part.Nack(rctx, sub, r, op.Delay)
			case replcursor.Extend:
				out[i] = h.part.Extend(rctx, sub, r, op.Timeout)
			case replpart.CursorDeadLetter:
				out[i] = h.part.DeadLetter(rctx, sub, r)
			}
		}()
	}
	wg.Wait()
	return out
}
