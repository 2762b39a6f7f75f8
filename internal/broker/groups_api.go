package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
)

// The consumer-group API. Requests and answers are internal/group's types:
// the Kafka front-end fills them from JoinGroup, SyncGroup, … one to one,
// and errors are group's sentinels (ErrUnknownMember, ErrIllegalGeneration,
// …), which both front-ends map to their codes.

func (b *Broker) groups() (*groupRT, error) {
	if b.streams == nil || b.streams.groups == nil {
		return nil, ErrClosed
	}
	return b.streams.groups, nil
}

// JoinGroup joins (or rejoins) a member and waits for the generation to
// form: until every known member rejoined or the rebalance timeout passed,
// as Kafka's JoinGroup does. The result's Err is also returned; with
// group.ErrMemberIDRequired the result carries the id to rejoin with. If ctx
// ends first the join stays pending in the coordinator (as a disconnected
// Kafka client's does) and ctx.Err() is returned.
func (b *Broker) JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResult, error) {
	g, err := b.groups()
	if err != nil {
		return group.JoinResult{}, err
	}
	if err := b.CheckCoordinator(ctx); err != nil {
		return group.JoinResult{}, err
	}
	ch := make(chan group.JoinResult, 1)
	if err := g.lockChecked(); err != nil {
		return group.JoinResult{}, err
	}
	if g.closed {
		g.mu.Unlock()
		return group.JoinResult{}, ErrClosed
	}
	t, out := g.coord.Join(b.now(), req)
	g.joins[t] = ch
	durable := g.persistLocked(ctx, out)
	g.mu.Unlock()
	if err := durable(); err != nil {
		return group.JoinResult{}, err
	}
	select {
	case r := <-ch:
		return r, r.Err
	case <-ctx.Done():
		g.mu.Lock()
		delete(g.joins, t)
		g.mu.Unlock()
		return group.JoinResult{}, ctx.Err()
	}
}

// SyncGroup returns the member's assignment for the current generation; the
// leader of a leader-assigned group sends everyone's. Followers wait for
// the leader's sync (or the rebalance timeout).
func (b *Broker) SyncGroup(ctx context.Context, req group.SyncRequest) (group.SyncResult, error) {
	g, err := b.groups()
	if err != nil {
		return group.SyncResult{}, err
	}
	if err := b.CheckCoordinator(ctx); err != nil {
		return group.SyncResult{}, err
	}
	ch := make(chan group.SyncResult, 1)
	if err := g.lockChecked(); err != nil {
		return group.SyncResult{}, err
	}
	if g.closed {
		g.mu.Unlock()
		return group.SyncResult{}, ErrClosed
	}
	t, out := g.coord.Sync(b.now(), req)
	g.syncs[t] = ch
	durable := g.persistLocked(ctx, out) // in a cluster the leader's: the group's record
	g.mu.Unlock()
	if err := durable(); err != nil {
		return group.SyncResult{}, err
	}
	select {
	case r := <-ch:
		return r, r.Err
	case <-ctx.Done():
		g.mu.Lock()
		delete(g.syncs, t)
		g.mu.Unlock()
		return group.SyncResult{}, ctx.Err()
	}
}

// Heartbeat keeps a member's session alive. group.ErrRebalanceInProgress
// tells it to rejoin.
func (b *Broker) Heartbeat(req group.HeartbeatRequest) error {
	g, err := b.groups()
	if err != nil {
		return err
	}
	if err := b.CheckCoordinator(context.Background()); err != nil {
		return err
	}
	if err := g.lockChecked(); err != nil {
		return err
	}
	defer g.mu.Unlock()
	err = g.coord.Heartbeat(b.now(), req)
	g.dispatchLocked(group.Output{}) // re-arm the ticker: the session moved
	return err
}

// LeaveGroup removes members; errs is index-aligned with refs.
func (b *Broker) LeaveGroup(groupID string, refs []group.MemberRef) ([]error, error) {
	g, err := b.groups()
	if err != nil {
		return nil, err
	}
	if err := b.CheckCoordinator(context.Background()); err != nil {
		return nil, err
	}
	if err := g.lockChecked(); err != nil {
		return nil, err
	}
	errs, out := g.coord.Leave(b.now(), groupID, refs)
	ctx, cancel := context.WithTimeout(context.Background(), coordinatorReadyTimeout)
	defer cancel()
	durable := g.persistLocked(ctx, out) // in a cluster: the record without the members who left
	g.mu.Unlock()
	return errs, durable()
}

// CommitOffsets commits offsets, fenced by member and generation (see
// package group), and answers once they are durable. err refuses the whole
// request; otherwise errs (index-aligned with req.Offsets) refuses single
// partitions: ErrTopicNotFound or ErrUnknownPartition for partitions that
// do not exist, group's errors for the rest.
func (b *Broker) CommitOffsets(ctx context.Context, req group.CommitRequest) ([]error, error) {
	g, err := b.groups()
	if err != nil {
		return nil, err
	}
	if err := b.CheckCoordinator(ctx); err != nil {
		return nil, err
	}
	errs := make([]error, len(req.Offsets))
	var keep []group.OffsetCommit
	var idx []int
	for i, o := range req.Offsets {
		if _, _, err := b.streams.partition(o.Topic, o.Partition); err != nil {
			errs[i] = err
			continue
		}
		keep, idx = append(keep, o), append(idx, i)
	}
	req.Offsets = keep
	if err := g.lockChecked(); err != nil {
		return nil, err
	}
	cerrs, out, err := g.coord.Commit(b.now(), req)
	durable := g.persistLocked(ctx, out)
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for j, e := range cerrs {
		errs[idx[j]] = e
	}
	if err := durable(); err != nil {
		return nil, fmt.Errorf("commit not durable: %w", err)
	}
	return errs, nil
}

// FetchOffset returns a group's committed offset for one partition; ok is
// false when there is none (Kafka answers offset -1). In a cluster only what
// the metadata group committed (ConfirmCoordinator first, for a fetch that
// must see every commit acknowledged before it).
func (b *Broker) FetchOffset(groupID, topic string, partition int32) (group.Committed, bool) {
	g, err := b.groups()
	if err != nil {
		return group.Committed{}, false
	}
	g.lockForRead()
	defer g.mu.Unlock()
	return g.committedLocked().Fetch(groupID, topic, partition)
}

// GroupOffsets returns all of a group's committed offsets, sorted.
func (b *Broker) GroupOffsets(groupID string) []group.CommittedOffset {
	g, err := b.groups()
	if err != nil {
		return nil
	}
	g.lockForRead()
	defer g.mu.Unlock()
	return g.committedLocked().Offsets(groupID)
}

// ListGroups lists every group.
func (b *Broker) ListGroups() []group.GroupSummary {
	g, err := b.groups()
	if err != nil {
		return nil
	}
	g.lockForRead()
	defer g.mu.Unlock()
	return g.coord.List()
}

// DescribeGroup describes a group; ok is false (State Dead) if unknown.
func (b *Broker) DescribeGroup(groupID string) (group.GroupInfo, bool) {
	g, err := b.groups()
	if err != nil {
		return group.GroupInfo{Group: groupID, State: group.Dead}, false
	}
	g.lockForRead()
	defer g.mu.Unlock()
	return g.coord.Describe(groupID)
}

// DeleteGroup deletes an Empty group and its offsets, durably.
func (b *Broker) DeleteGroup(groupID string) error {
	g, err := b.groups()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupChangeTimeout)
	defer cancel()
	if err := b.CheckCoordinator(ctx); err != nil {
		return err
	}
	if err := g.lockChecked(); err != nil {
		return err
	}
	out, err := g.coord.Delete(groupID)
	durable := g.persistLocked(ctx, out)
	g.mu.Unlock()
	return errors.Join(err, durable())
}

// groupChangeTimeout bounds, in a cluster, the wait for the metadata group's commit of a
// group change made by a call that has no context of its own.
const groupChangeTimeout = 10 * time.Second

// ResetTo says where ResetGroupOffsets moves a group.
type ResetTo int

const (
	ResetEarliest ResetTo = iota // the log start
	ResetLatest                  // the high watermark: skip everything
	ResetToOffset                // Offset, clamped into the log
	ResetToTime                  // the first record at or after Time
)

// ResetSpec is a reset target.
type ResetSpec struct {
	To     ResetTo
	Offset int64
	Time   time.Time
}

// ResetGroupOffsets moves an inactive group's offsets in a topic (all
// partitions when partitions is nil): replay from the start, from a time,
// or skip to the end. It refuses with group.ErrGroupNotEmpty while the
// group has members. It returns the offsets set.
func (b *Broker) ResetGroupOffsets(groupID, topic string, partitions []int32, spec ResetSpec) ([]group.OffsetCommit, error) {
	g, err := b.groups()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupChangeTimeout)
	defer cancel()
	if err := b.CheckCoordinator(ctx); err != nil {
		return nil, err
	}
	t, err := b.streams.topic(topic)
	if err != nil {
		return nil, err
	}
	_, parts := t.snapshot()
	if partitions == nil {
		for i := range parts {
			partitions = append(partitions, int32(i))
		}
	}
	var offs []group.OffsetCommit
	for _, p := range partitions {
		if p < 0 || int(p) >= len(parts) {
			return nil, fmt.Errorf("%w: %s/%d", ErrUnknownPartition, topic, p)
		}
		off, err := resolveReset(parts[p], spec)
		if err != nil {
			return nil, err
		}
		offs = append(offs, group.OffsetCommit{Topic: topic, Partition: p, Offset: off, LeaderEpoch: -1})
	}
	if err := g.lockChecked(); err != nil {
		return nil, err
	}
	out, err := g.coord.ResetOffsets(b.now(), groupID, offs)
	durable := g.persistLocked(ctx, out)
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return offs, durable()
}

func resolveReset(p *partitionRT, spec ResetSpec) (int64, error) {
	start, hw := p.log.LogStartOffset(), p.log.HighWatermark()
	switch spec.To {
	case ResetEarliest:
		return start, nil
	case ResetLatest:
		return hw, nil
	case ResetToOffset:
		return min(max(spec.Offset, start), hw), nil
	case ResetToTime:
		off, err := p.log.OffsetForTime(spec.Time.UnixMilli())
		if err != nil {
			return 0, mapStorageErr(err)
		}
		if off < 0 {
			return hw, nil
		}
		return max(off, start), nil
	}
	return 0, invalid("reset", "unknown target %d", spec.To)
}

// ConsumerJoin is a native-API consumer joining a broker-assigned group.
type ConsumerJoin struct {
	Group, MemberID, ClientID string
	Topics                    []string
	SessionTimeout            time.Duration // default 30 s
	RebalanceTimeout          time.Duration // default the session timeout
	Assignor                  string        // "range" (default) or "roundrobin"
}

// ConsumerAssignment is what a broker-assigned member owns.
type ConsumerAssignment struct {
	MemberID   string
	Generation int32
	Leader     string
	Partitions []group.TopicPartitions
}

// JoinConsumer joins a broker-assigned group (the native API) and waits
// for its assignment. The member then heartbeats within the session
// timeout, commits with its generation, and calls JoinConsumer again with
// its member id when a heartbeat answers group.ErrRebalanceInProgress.
func (b *Broker) JoinConsumer(ctx context.Context, req ConsumerJoin) (ConsumerAssignment, error) {
	if req.SessionTimeout == 0 {
		req.SessionTimeout = 30 * time.Second
	}
	if req.Assignor == "" {
		req.Assignor = group.AssignorRange
	}
	r, err := b.JoinGroup(ctx, group.JoinRequest{
		Group: req.Group, MemberID: req.MemberID, ClientID: req.ClientID, Mode: group.BrokerAssigns,
		ProtocolType: "sluice", Protocols: []group.Protocol{{Name: req.Assignor}}, Topics: req.Topics,
		SessionTimeout: req.SessionTimeout, RebalanceTimeout: req.RebalanceTimeout,
	})
	if err != nil {
		return ConsumerAssignment{MemberID: r.MemberID}, err
	}
	return ConsumerAssignment{MemberID: r.MemberID, Generation: r.Generation, Leader: r.Leader, Partitions: r.Assignment}, nil
}

// DeleteOffsets removes a group's committed offsets of the listed
// partitions, durably (Kafka's OffsetDelete). errs is index-aligned with
// partitions; offsets of a topic a member of a non-Empty group subscribes
// to are refused with ErrGroupSubscribedToTopic, an unknown group with
// ErrGroupNotFound. A partition with no offset is not an error.
func (b *Broker) DeleteOffsets(groupID string, partitions []group.TopicPartitions) ([][]error, error) {
	g, err := b.groups()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupChangeTimeout)
	defer cancel()
	if err := b.CheckCoordinator(ctx); err != nil {
		return nil, err
	}
	if err := g.lockChecked(); err != nil {
		return nil, err
	}
	errs, out, err := g.coord.DeleteOffsets(b.now(), groupID, partitions)
	durable := g.persistLocked(ctx, out)
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := durable(); err != nil {
		return nil, fmt.Errorf("offset deletion not durable: %w", err)
	}
	return errs, nil
}
