package group

import (
	"cmp"
	"slices"
	"time"
)

// Committed is a group's committed position in one partition: the offset
// of the next record to consume, as in Kafka.
type Committed struct {
	Offset      int64
	LeaderEpoch int32 // -1 when unknown
	Metadata    string
	CommitTime  time.Time // millisecond precision, as journaled
}

// CommittedOffset is a Committed with its partition.
type CommittedOffset struct {
	Topic     string
	Partition int32
	Committed
}

// OffsetCommit is one partition of a commit or reset.
type OffsetCommit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommitRequest commits offsets for a group. A member commits with its
// member id and generation; a tool managing offsets by hand commits with
// Generation -1, which only an Empty group accepts.
type CommitRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	Offsets    []OffsetCommit
	// Classic: the request cannot carry a KIP-848 member epoch
	// (OffsetCommit before v9), which members of consumer groups must send.
	Classic bool
}

// Commit records offsets. err refuses the whole request (fencing:
// ErrIllegalGeneration, ErrUnknownMember, ErrRebalanceInProgress, ...);
// otherwise errs, index-aligned with req.Offsets, refuses single
// partitions and the accepted ones are in out.Events, which the broker
// must journal before answering.
func (c *Coordinator) Commit(now time.Time, req CommitRequest) (errs []error, out Output, err error) {
	if req.Group == "" {
		return nil, out, ErrInvalidGroupID
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			// Either a member of a group this broker forgot (restart) or a
			// stale request; both must not write.
			return nil, out, ErrIllegalGeneration
		}
		g = c.getOrCreate(req.Group)
	}
	var cm *cmember
	if g.cg != nil {
		cm, err = checkConsumerCommitter(g, req)
	} else {
		err = c.checkCommitter(g, now, req)
	}
	if err != nil {
		return nil, out, err
	}
	errs = make([]error, len(req.Offsets))
	ev := Event{Type: EventOffsetsCommitted, Group: g.id, Time: time.UnixMilli(now.UnixMilli())}
	for i, o := range req.Offsets {
		if errs[i] = c.checkOffset(g, req, o); errs[i] != nil {
			continue
		}
		if errs[i] = cm.checkCommitEpoch(req.Generation, o); errs[i] != nil {
			continue
		}
		// Re-committing the stored value (auto-commit of an idle
		// partition every few seconds) is accepted but not journaled:
		// it changes nothing durable and would cost a sync each time.
		if old, ok := g.offsets[topicPartition{o.Topic, o.Partition}]; ok &&
			old.Offset == o.Offset && old.LeaderEpoch == o.LeaderEpoch && old.Metadata == o.Metadata {
			continue
		}
		ev.Offsets = append(ev.Offsets, CommittedOffset{Topic: o.Topic, Partition: o.Partition,
			Committed: Committed{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: ev.Time}})
	}
	if len(ev.Offsets) > 0 {
		g.apply(ev)
		out.Events = append(out.Events, ev)
	}
	return errs, out, nil
}

// checkCommitter applies Kafka's commit fence: generation -1 is a commit
// from outside group management, allowed only while the group is Empty
// (whatever member id it carries: it is no member); anything else must
// come from a current member of the current generation.
func (c *Coordinator) checkCommitter(g *group, now time.Time, req CommitRequest) error {
	if req.InstanceID != "" {
		if owner, ok := g.static[req.InstanceID]; ok && owner != req.MemberID {
			return ErrFencedInstanceID
		}
	}
	if req.Generation < 0 && g.state == Empty {
		return nil
	}
	if err := g.checkMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	// Members of the current generation may commit while it rebalances
	// (they commit while revoking), but not between join and sync, when
	// they cannot yet know their new assignment.
	if g.state == CompletingRebalance {
		return ErrRebalanceInProgress
	}
	g.members[req.MemberID].lastSeen = now
	return nil
}

// checkOffset refuses what Kafka cannot mean. Offsets -1 and -2 are
// Kafka's latest and earliest: clients (KafkaJS-style resetOffsets, seek to
// "-2") commit them, Kafka stores them as sent, and the next reader
// resolves them, so they are stored too. Lower offsets mean nothing.
func (c *Coordinator) checkOffset(g *group, req CommitRequest, o OffsetCommit) error {
	if o.Topic == "" || o.Partition < 0 || o.Offset < MinCommitOffset {
		return ErrInvalidOffset
	}
	if len(o.Metadata) > c.cfg.MaxMetadataSize {
		return ErrMetadataTooLarge
	}
	if m := g.members[req.MemberID]; m != nil && g.mode == BrokerAssigns && !owns(m, o.Topic, o.Partition) {
		return ErrNotAssigned
	}
	return nil
}

func owns(m *member, topic string, p int32) bool {
	for _, tp := range m.partitions {
		if tp.Topic == topic {
			_, found := slices.BinarySearch(tp.Partitions, p)
			return found
		}
	}
	return false
}

// Fetch returns the group's committed offset for one partition.
func (c *Coordinator) Fetch(group, topic string, partition int32) (Committed, bool) {
	g := c.groups[group]
	if g == nil {
		return Committed{}, false
	}
	o, ok := g.offsets[topicPartition{topic, partition}]
	return o, ok
}

// Offsets returns all of a group's committed offsets, sorted by topic and
// partition (OffsetFetch with no topics, lag reports).
func (c *Coordinator) Offsets(group string) []CommittedOffset {
	g := c.groups[group]
	if g == nil {
		return nil
	}
	out := make([]CommittedOffset, 0, len(g.offsets))
	for tp, o := range g.offsets {
		out = append(out, CommittedOffset{Topic: tp.topic, Partition: tp.partition, Committed: o})
	}
	slices.SortFunc(out, func(a, b CommittedOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// ResetOffsets sets offsets of an inactive group (replay). The broker has
// already resolved "earliest", "latest" or "at time T" to offsets; the
// coordinator only refuses while anyone is a member, because an active
// member would overwrite the reset with its next commit.
func (c *Coordinator) ResetOffsets(now time.Time, group string, offsets []OffsetCommit) (Output, error) {
	if group == "" {
		return Output{}, ErrInvalidGroupID
	}
	if g := c.groups[group]; g != nil && g.busy() {
		return Output{}, ErrGroupNotEmpty
	}
	for _, o := range offsets {
		if o.Topic == "" || o.Partition < 0 || o.Offset < 0 {
			return Output{}, ErrInvalidOffset
		}
		if len(o.Metadata) > c.cfg.MaxMetadataSize {
			return Output{}, ErrMetadataTooLarge
		}
	}
	g := c.getOrCreate(group)
	ev := Event{Type: EventOffsetsCommitted, Group: group, Time: time.UnixMilli(now.UnixMilli())}
	for _, o := range offsets {
		ev.Offsets = append(ev.Offsets, CommittedOffset{Topic: o.Topic, Partition: o.Partition,
			Committed: Committed{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: ev.Time}})
	}
	g.apply(ev)
	return Output{Events: []Event{ev}}, nil
}

// DeleteOffsets removes committed offsets (Kafka OffsetDelete). errs is
// index-aligned with partitions; a partition of a topic that a current
// member subscribes to is refused, because that member would commit it
// again (Kafka refuses the same way).
func (c *Coordinator) DeleteOffsets(now time.Time, group string, partitions []TopicPartitions) (errs [][]error, out Output, err error) {
	g := c.groups[group]
	switch {
	case group == "":
		return nil, out, ErrInvalidGroupID
	case g == nil:
		return nil, out, ErrGroupNotFound
	}
	ev := Event{Type: EventOffsetsDeleted, Group: group, Time: time.UnixMilli(now.UnixMilli())}
	errs = make([][]error, len(partitions))
	for i, tp := range partitions {
		errs[i] = make([]error, len(tp.Partitions))
		busy := (g.state != Empty && g.subscribes(tp.Topic)) || (g.cg != nil && g.cg.subscribesTopic(tp.Topic))
		for j, p := range tp.Partitions {
			if busy {
				errs[i][j] = ErrGroupSubscribedToTopic
				continue
			}
			if _, ok := g.offsets[topicPartition{tp.Topic, p}]; ok {
				ev.Offsets = append(ev.Offsets, CommittedOffset{Topic: tp.Topic, Partition: p})
			}
		}
	}
	if len(ev.Offsets) > 0 {
		g.apply(ev)
		out.Events = append(out.Events, ev)
	}
	return errs, out, nil
}

// forgetTopic deletes every group's offsets for a deleted topic, so a new
// topic of the same name does not start its consumers at stale positions.
func (c *Coordinator) forgetTopic(now time.Time, topic string) Output {
	var out Output
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		ev := Event{Type: EventOffsetsDeleted, Group: id, Time: time.UnixMilli(now.UnixMilli())}
		for _, o := range c.Offsets(id) {
			if o.Topic == topic {
				ev.Offsets = append(ev.Offsets, CommittedOffset{Topic: o.Topic, Partition: o.Partition})
			}
		}
		if len(ev.Offsets) > 0 {
			g.apply(ev)
			out.Events = append(out.Events, ev)
		}
	}
	return out
}
