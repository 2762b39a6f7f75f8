package client

import (
	"context"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// JoinGroup joins (or rejoins) a broker-assigned consumer group and returns
// this member's partitions once the group settles.
func (c *Client) JoinGroup(ctx context.Context, req *JoinGroupRequest) (*JoinGroupResponse, error) {
	return call(ctx, c.group.JoinGroup, req)
}

// Heartbeat keeps a member alive; true means rebalance: commit, then rejoin.
func (c *Client) Heartbeat(ctx context.Context, group, memberID string, generation int32) (bool, error) {
	res, err := call(ctx, c.group.Heartbeat, &sluicev1.HeartbeatRequest{Group: group, MemberId: memberID, Generation: generation})
	return res.GetRebalanceRequired(), err
}

// LeaveGroup removes a member at once.
func (c *Client) LeaveGroup(ctx context.Context, group, memberID string) error {
	_, err := call(ctx, c.group.LeaveGroup, &sluicev1.LeaveGroupRequest{Group: group, MemberId: memberID})
	return err
}

// CommitOffsets stores the next offsets to read, fenced by generation.
func (c *Client) CommitOffsets(ctx context.Context, group, memberID string, generation int32, offsets []*CommittedOffset) error {
	_, err := call(ctx, c.group.CommitOffsets, &sluicev1.CommitOffsetsRequest{Group: group, MemberId: memberID, Generation: generation, Offsets: offsets})
	return err
}

// FetchOffsets returns committed offsets; nil partitions means all.
func (c *Client) FetchOffsets(ctx context.Context, group string, partitions []*TopicPartitions) ([]*CommittedOffset, error) {
	res, err := call(ctx, c.group.FetchOffsets, &sluicev1.FetchOffsetsRequest{Group: group, Partitions: partitions})
	return res.GetOffsets(), err
}

// ListGroups lists every group, Kafka-protocol groups included.
func (c *Client) ListGroups(ctx context.Context) ([]*GroupSummary, error) {
	res, err := call(ctx, c.group.ListGroups, &sluicev1.ListGroupsRequest{})
	return res.GetGroups(), err
}

// DescribeGroup returns a group's members, assignments, offsets and lag.
func (c *Client) DescribeGroup(ctx context.Context, group string) (*DescribeGroupResponse, error) {
	return call(ctx, c.group.DescribeGroup, &sluicev1.DescribeGroupRequest{Group: group})
}

// ResetOffsets moves an inactive group's offsets (set req.DryRun to preview).
func (c *Client) ResetOffsets(ctx context.Context, req *ResetOffsetsRequest) ([]*CommittedOffset, error) {
	res, err := call(ctx, c.group.ResetOffsets, req)
	return res.GetOffsets(), err
}
