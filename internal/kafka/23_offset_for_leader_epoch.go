package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleOffsetForLeaderEpoch answers clients that check for log truncation
// (KIP-320). A partition has had one leader, at epoch 0, since it was
// created, so epoch 0 ends at the high watermark and later epochs are
// unknown. In a cluster epochs are Raft terms (clusterEpochEnd).
func handleOffsetForLeaderEpoch(_ context.Context, c *conn, req *kmsg.OffsetForLeaderEpochRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		denied := !c.may(auth.Describe, auth.Topic, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LeaderEpoch, rp.EndOffset = -1, -1
			switch {
			case denied:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case c.s.b.Clustered():
				c.clusterEpochEnd(t.Topic, p, &rp) // epochs are Raft terms there
			case p.CurrentLeaderEpoch > 0:
				rp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case p.LeaderEpoch > 0:
				// An epoch after ours: Kafka's "undefined" answer.
			default:
				at, err := c.s.b.ListOffsets(t.Topic, p.Partition, -1)
				rp.ErrorCode = errCode(err, nil)
				if err == nil {
					rp.LeaderEpoch, rp.EndOffset = 0, at.Offset
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
