package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// offsetMaxTimestamp is ListOffsets v7's "offset of the record with the
// largest timestamp" (KIP-734), which the broker does not index.
const offsetMaxTimestamp = -3

// handleListOffsets resolves earliest (-2), latest (-1) and timestamps to
// offsets. The leader epoch is always 0: there is no replication yet.
func handleListOffsets(_ context.Context, c *conn, req *kmsg.ListOffsetsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		denied := !c.may(auth.Describe, auth.Topic, t.Topic)
		for _, p := range t.Partitions {
			if denied {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rt.Partitions = append(rt.Partitions, c.listOffset(req.Version, t.Topic, p))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}

func (c *conn) listOffset(version int16, topic string, p kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
	rp := kmsg.NewListOffsetsResponseTopicPartition()
	rp.Partition = p.Partition
	if p.Timestamp == offsetMaxTimestamp {
		rp.ErrorCode = kerr.UnsupportedVersion.Code
		return rp
	}
	at, err := c.s.b.ListOffsets(topic, p.Partition, p.Timestamp)
	if err != nil {
		rp.ErrorCode = errCode(err, kerr.InvalidRequest)
		return rp
	}
	rp.Offset, rp.Timestamp, rp.LeaderEpoch = at.Offset, at.Timestamp, 0
	if at.Offset < 0 {
		rp.LeaderEpoch = -1
	}
	if version == 0 && at.Offset >= 0 && p.MaxNumOffsets > 0 {
		// v0 answers a list (segment starts, newest first); one offset is
		// what every client reads from it.
		rp.OldStyleOffsets = []int64{at.Offset}
	}
	return rp
}
