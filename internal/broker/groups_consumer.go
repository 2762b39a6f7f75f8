package broker

import (
	"context"

	"github.com/sluice-mq/sluice/internal/group"
)

// KIP-848 consumer groups: the heartbeat is their one membership call.
// On a single node their membership lives in the coordinator's memory
// only, like classic membership; in a cluster a heartbeat that changes it
// returns the group's record, proposed with the answer waiting for its
// commit (cluster_groups.go), so a new controller keeps the members.
// Their offsets go through CommitOffsets as any group's do.

// ConsumerGroupHeartbeat joins, heartbeats, reconciles or leaves a member
// of a consumer group; errors (group's sentinels, or a
// *NotCoordinatorError in a cluster) are in the result's Err.
func (b *Broker) ConsumerGroupHeartbeat(ctx context.Context, req group.ConsumerHeartbeatRequest) group.ConsumerHeartbeatResult {
	g, err := b.groups()
	if err == nil {
		err = b.CheckCoordinator(ctx)
	}
	if err == nil {
		err = g.lockChecked()
	}
	if err != nil {
		return group.ConsumerHeartbeatResult{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	res, out := g.coord.ConsumerHeartbeat(b.now(), req)
	// Re-arms the ticker (a session moved); the durable events (the group's
	// type when a heartbeat makes the group; in a cluster, the group's
	// record when it changed) are answered once stored.
	durable := g.persistLocked(ctx, out)
	g.mu.Unlock()
	for _, r := range out.Removed {
		g.logger.Info("consumer group member removed", "group", r.Group, "member", r.MemberID, "reason", r.Reason.String())
	}
	if err := durable(); err != nil && res.Err == nil {
		return group.ConsumerHeartbeatResult{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	return res
}

// CheckOffsetFetch is OffsetFetch v9's fence: a member of a consumer group
// reads its group's offsets at its current epoch (epoch -1: anyone).
func (b *Broker) CheckOffsetFetch(groupID, memberID string, epoch int32) error {
	g, err := b.groups()
	if err != nil {
		return err
	}
	g.lockForRead()
	defer g.mu.Unlock()
	return g.coord.CheckFetch(groupID, memberID, epoch)
}
