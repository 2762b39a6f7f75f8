package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// ListOffsets' special timestamps beyond the broker's -1, -2 and -3, all
// about tiered storage (KIP-405, KIP-1005), which sluice does not have:
// everything is local.
const (
	offsetEarliestLocal   = -4 // v8+: the first offset on local disk
	offsetLatestTiered    = -5 // v9+: the last offset in remote storage
	offsetEarliestPending = -6 // v11+: the first offset not yet uploaded
)

// handleListOffsets resolves earliest (-2), latest (-1), max timestamp
// (-3, v7+), the tiered-storage timestamps, and times to offsets. The
// leader epoch is always 0: there is no replication yet.
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
			rt.Partitions = append(rt.Partitions, c.listOffset(req, t.Topic, p))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}

func (c *conn) listOffset(req *kmsg.ListOffsetsRequest, topic string, p kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
	version := req.Version
	rp := kmsg.NewListOffsetsResponseTopicPartition()
	rp.Partition = p.Partition
	ts := p.Timestamp
	switch ts {
	case offsetEarliestLocal:
		ts = broker.OffsetEarliest // all of the log is local
	case broker.OffsetLatest:
		if req.IsolationLevel == readCommitted {
			ts = broker.OffsetLastStable // a read_committed reader's end
		}
	case offsetLatestTiered, offsetEarliestPending:
		// Nothing is tiered: Kafka without remote storage answers -1.
		if n, err := c.s.b.PartitionCount(topic); err != nil || p.Partition < 0 || p.Partition >= n {
			rp.ErrorCode = errCode(err, nil)
			if err == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			return rp
		}
		rp.Offset, rp.Timestamp, rp.LeaderEpoch = -1, -1, -1
		return rp
	}
	at, err := c.s.b.ListOffsets(topic, p.Partition, ts)
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
