package group

import "time"

// CheckTxnCommit applies to a TxnOffsetCommit the fence a plain commit
// gets (member and generation, when the request carries them; Kafka's
// clients send them from 2.5 on, KIP-447) and the per-offset checks,
// without committing: the offsets wait in the transaction coordinator
// until the transaction commits. A request without a member (generation
// -1) is accepted whatever the group's state, as Kafka accepts it: the
// producer's epoch is its fence.
func (c *Coordinator) CheckTxnCommit(now time.Time, req CommitRequest) error {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	g := c.groups[req.Group]
	var cm *cmember
	if req.Generation >= 0 {
		if g == nil {
			return ErrUnknownMember
		}
		var err error
		if g.cg != nil {
			// A KIP-848 group: the generation field carries the member epoch.
			cm, err = checkConsumerCommitter(g, req)
		} else {
			err = c.checkCommitter(g, now, req)
		}
		if err != nil {
			return err
		}
	}
	for _, o := range req.Offsets {
		if o.Topic == "" || o.Partition < 0 || o.Offset < MinCommitOffset {
			return ErrInvalidOffset
		}
		if len(o.Metadata) > c.cfg.MaxMetadataSize {
			return ErrMetadataTooLarge
		}
		if err := cm.checkCommitEpoch(req.Generation, o); err != nil {
			return err
		}
	}
	return nil
}

// ApplyTxnOffsets commits the offsets of a committed transaction: checked
// at TxnOffsetCommit, they are applied whatever the group's members are
// now, as Kafka materialises them at the commit marker. The broker must
// journal out.Events.
func (c *Coordinator) ApplyTxnOffsets(now time.Time, group string, offsets []OffsetCommit) Output {
	if group == "" || len(offsets) == 0 {
		return Output{}
	}
	g := c.getOrCreate(group)
	ev := Event{Type: EventOffsetsCommitted, Group: group, Time: time.UnixMilli(now.UnixMilli())}
	for _, o := range offsets {
		ev.Offsets = append(ev.Offsets, CommittedOffset{Topic: o.Topic, Partition: o.Partition,
			Committed: Committed{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: ev.Time}})
	}
	g.apply(ev)
	return Output{Events: []Event{ev}}
}
