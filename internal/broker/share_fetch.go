package broker

import (
	"context"
	"reflect"
	"sort"
	"time"
)

// ShareFetchRequest is a ShareFetch (or, with NoFetch, a ShareAcknowledge)
// in the broker's terms: topics by name.
type ShareFetchRequest struct {
	Group, MemberID string
	SessionEpoch    int32
	Add, Forget     []SharePartition // partitions joining and leaving the session
	Acks            map[SharePartition][]ShareAckBatch
	MaxRecords      int
	MaxWait         time.Duration
	NoFetch         bool // ShareAcknowledge, or a renew-only ShareFetch
	Acknowledge     bool // a ShareAcknowledge, which cannot open a session
	// Conn names the connection asking; the session epoch 0 opens is
	// ended by ShareConnClosed with it.
	Conn uint64
}

// ShareAcquired is a run of acquired offsets with one delivery count.
type ShareAcquired struct {
	First, Last   int64
	DeliveryCount int16
}

// SharePartitionResult is one partition's part of the answer: AckErr for
// its acknowledgements, Err for its fetch.
type SharePartitionResult struct {
	SharePartition
	Err, AckErr error
	Records     []byte
	Acquired    []ShareAcquired
}

// ShareFetchResult is the answer; Err is the request's as a whole (then
// nothing was changed).
type ShareFetchResult struct {
	Err          error
	LockDuration time.Duration
	Parts        []SharePartitionResult
}

// MaxShareFetchRecords bounds one ShareFetch's acquisitions.
const MaxShareFetchRecords = 10_000

// ShareFetch settles a member's acknowledgements, then acquires records of
// its session's partitions for the group's lock duration, waiting up to
// MaxWait for some if there are none.
func (b *Broker) ShareFetch(ctx context.Context, req ShareFetchRequest) ShareFetchResult {
	for _, bs := range req.Acks {
		if err := checkAckBatches(bs); err != nil {
			return ShareFetchResult{Err: err}
		}
	}
	if b.cluster != nil {
		return b.clusterShareFetch(ctx, req) // cluster_share.go
	}
	cfg := b.ShareGroupConfig(req.Group)
	g := b.shares().group(req.Group, false)
	if g == nil {
		return ShareFetchResult{Err: ErrGroupNotFound}
	}
	g.mu.Lock()
	m, s, err := b.shareSessionLocked(g, req)
	if err != nil {
		g.mu.Unlock()
		return ShareFetchResult{Err: err}
	}
	res := ShareFetchResult{LockDuration: cfg.LockDuration}
	part := resultParts(&res)
	for _, sp := range sortedParts(req.Acks) {
		acks, err := planAcks(s.held[sp], req.Acks[sp])
		if err == nil {
			err = b.settleAcks(ctx, g.id, cfg, s, sp, acks)
		}
		part(sp).AckErr = err
	}
	for _, sp := range req.Forget {
		b.shareRelease(g.id, sp, s.forget(sp))
	}
	if req.SessionEpoch == -1 {
		b.releaseSession(g.id, s)
		m.session = nil
		g.mu.Unlock()
		return res
	}
	for _, sp := range req.Add {
		s.add(sp)
	}
	s.bump()
	g.mu.Unlock()
	if req.NoFetch {
		return res
	}
	b.shareAcquire(ctx, g, s, cfg, req, part)
	return res
}

// shareSessionLocked finds the member and its session for the request's
// epoch, opening a new session at 0. Called with g.mu held.
func (b *Broker) shareSessionLocked(g *shareGroup, req ShareFetchRequest) (*shareMember, *shareSession, error) {
	b.expireMembersLocked(g, b.now())
	m := g.members[req.MemberID]
	if m == nil {
		return nil, nil, ErrUnknownMember
	}
	switch {
	case req.SessionEpoch == 0:
		if req.Acknowledge {
			return nil, nil, ErrShareSessionEpoch // as Kafka: ShareAcknowledge cannot open a session
		}
		if len(req.Acks) > 0 {
			return nil, nil, invalid("share_session_epoch", "acknowledgements need an open session (epoch > 0)")
		}
		if m.session != nil {
			b.releaseSession(g.id, m.session)
		}
		m.session = &shareSession{conn: req.Conn, held: map[SharePartition]map[int64]shareHeld{}}
	case m.session == nil:
		return nil, nil, ErrShareSessionNotFound
	case req.SessionEpoch != -1 && req.SessionEpoch != m.session.epoch:
		return nil, nil, ErrShareSessionEpoch
	}
	return m, m.session, nil
}

func sortedParts(m map[SharePartition][]ShareAckBatch) []SharePartition {
	out := make([]SharePartition, 0, len(m))
	for sp := range m {
		out = append(out, sp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// shareAcquire acquires up to MaxRecords over the session's partitions,
// round robin, long-polling up to MaxWait while there are none.
func (b *Broker) shareAcquire(ctx context.Context, g *shareGroup, s *shareSession, cfg ShareConfig,
	req ShareFetchRequest, part func(SharePartition) *SharePartitionResult) {
	limit := req.MaxRecords
	if limit <= 0 || limit > MaxShareFetchRecords {
		limit = MaxShareFetchRecords
	}
	deadline := time.Now().Add(req.MaxWait)
	for {
		g.mu.Lock()
		if g.members[req.MemberID] == nil || g.members[req.MemberID].session != s {
			g.mu.Unlock()
			return // the member left, or opened another session, meanwhile
		}
		got, wakes := b.acquireRoundLocked(ctx, g, s, cfg, limit, part)
		g.mu.Unlock()
		if got > 0 || req.MaxWait <= 0 || !time.Now().Before(deadline) || len(wakes) == 0 {
			return
		}
		if !waitAny(ctx, wakes, time.Until(deadline)) {
			return
		}
	}
}

// acquireRoundLocked tries each session partition once. It returns how many
// records it acquired, and the channels that wake a wait for more. Called
// with g.mu held.
func (b *Broker) acquireRoundLocked(ctx context.Context, g *shareGroup, s *shareSession, cfg ShareConfig,
	limit int, part func(SharePartition) *SharePartitionResult) (int, []<-chan struct{}) {
	got := 0
	var wakes []<-chan struct{}
	n := len(s.parts)
	for i := 0; i < n && got < limit; i++ {
		sp := s.parts[(s.next+i)%n]
		_, sub, err := b.subscription(sp.Topic, g.id)
		if err != nil {
			part(sp).Err = err
			continue
		}
		sub.mu.Lock()
		wakes = append(wakes, sub.wake)
		sub.mu.Unlock()
		ds, err := sub.acquirePart(ctx, int(sp.Partition), limit-got, cfg.LockDuration, cfg.DeliveryLimit, cfg.DeadLetterQueue)
		r := part(sp)
		if err != nil {
			r.Err = err
			continue
		}
		if len(ds) == 0 {
			continue
		}
		sort.Slice(ds, func(a, c int) bool { return ds[a].Offset < ds[c].Offset })
		offs := make([]int64, len(ds))
		for j, d := range ds {
			s.hold(sp, sub.receiptOf(int(sp.Partition), d), d)
			offs[j] = d.Offset
			if k := len(r.Acquired) - 1; k >= 0 && r.Acquired[k].Last+1 == d.Offset && r.Acquired[k].DeliveryCount == int16(d.ReceiveCount) {
				r.Acquired[k].Last = d.Offset
				continue
			}
			r.Acquired = append(r.Acquired, ShareAcquired{First: d.Offset, Last: d.Offset, DeliveryCount: int16(d.ReceiveCount)})
		}
		sub.mu.Lock()
		p := sub.parts[sp.Partition]
		sub.mu.Unlock()
		if r.Records, err = shareBatches(p, offs); err != nil {
			r.Err = err
		}
		got += len(ds)
	}
	if n > 0 {
		s.next = (s.next + 1) % n
	}
	return got, wakes
}

// waitAny blocks until one of wakes is closed, d passes or ctx ends; it
// reports whether to try again.
func waitAny(ctx context.Context, wakes []<-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
	}
	for _, w := range wakes {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
	}
	i, _, _ := reflect.Select(cases)
	return i >= 1
}

// resultParts finds a share-partition's part of res for ShareFetch's steps
// (the single node's and the cluster's), adding it the first time it is
// asked for. The pointer is good until the next part is added.
func resultParts(res *ShareFetchResult) func(SharePartition) *SharePartitionResult {
	at := map[SharePartition]int{}
	return func(sp SharePartition) *SharePartitionResult {
		i, ok := at[sp]
		if !ok {
			i = len(res.Parts)
			at[sp] = i
			res.Parts = append(res.Parts, SharePartitionResult{SharePartition: sp})
		}
		return &res.Parts[i]
	}
}
