package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterEpochEnd answers one partition of OffsetForLeaderEpoch in a cluster, where a
// partition's leader epoch is its Raft term (Metadata reports it). Only the leader
// answers (NOT_LEADER_OR_FOLLOWER elsewhere); a client's current epoch below the
// leader's is FENCED_LEADER_EPOCH (its metadata is stale), above it UNKNOWN_LEADER_EPOCH
// (this node's is); an epoch after the leader's is Kafka's "undefined" answer. For any
// other epoch the answer is the high watermark: no epoch index is kept yet, and the high
// watermark is never below the true end of an earlier epoch, while Raft never takes back
// a committed record, so no client is ever told of a truncation that did not happen
// (what the check exists for: a committed offset past the log's end).
func (c *conn) clusterEpochEnd(topic string, p kmsg.OffsetForLeaderEpochRequestTopicPartition, rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	pl, err := c.s.b.PartitionPlacement(topic, p.Partition)
	switch {
	case err != nil:
		rp.ErrorCode = errCode(err, nil)
		return
	case pl.Leader != c.s.cfg.NodeID:
		rp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	case p.CurrentLeaderEpoch >= 0 && p.CurrentLeaderEpoch < pl.Epoch:
		rp.ErrorCode = kerr.FencedLeaderEpoch.Code
		return
	case p.CurrentLeaderEpoch > pl.Epoch:
		rp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		return
	case p.LeaderEpoch > pl.Epoch:
		return // undefined: -1, -1
	}
	at, err := c.s.b.ListOffsets(topic, p.Partition, -1)
	rp.ErrorCode = errCode(err, nil)
	if err == nil {
		rp.LeaderEpoch, rp.EndOffset = max(p.LeaderEpoch, 0), at.Offset
	}
}
