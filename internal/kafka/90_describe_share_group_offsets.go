package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleDescribeShareGroupOffsets reports each share-partition's start
// offset (SPSO) and lag; null topics is every topic the group reads. A
// partition without state answers start -1, as Kafka does.
func handleDescribeShareGroupOffsets(_ context.Context, c *conn, req *kmsg.DescribeShareGroupOffsetsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		if !c.may(auth.Describe, auth.Group, g.GroupID) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		topics := g.Topics
		if topics == nil {
			for _, name := range c.s.b.ShareGroupTopics(g.GroupID) {
				topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name})
			}
		}
		for _, t := range topics {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = t.Topic
			s, ok := c.topicSettings(t.Topic)
			if ok {
				rt.TopicID = topicID(s)
			}
			offs, err := c.s.b.ShareGroupOffsets(g.GroupID, t.Topic)
			parts := t.Partitions
			if parts == nil {
				for _, o := range offs {
					parts = append(parts, o.Partition)
				}
			}
			for _, p := range parts {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
				switch {
				case !ok || !c.may(auth.Describe, auth.Topic, t.Topic):
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case p < 0 || p >= s.Partitions:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case err == nil && int(p) < len(offs):
					rp.StartOffset, rp.Lag, rp.LeaderEpoch = offs[p].Start, offs[p].Lag, 0
				case err != nil && !errors.Is(err, broker.ErrSubscriptionNotFound):
					// Not "no state": a failure the client must see rather than a -1.
					rp.ErrorCode, rp.ErrorMessage = shareOffsetsErrCode(err), errMessage(err)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return msg(resp)
}

// shareOffsetsErrCode is a partition's code for a failure to read its state. A node whose
// catalog does not have the group's subscription yet (a cluster node that became the
// coordinator a moment ago, or is not it) says NOT_COORDINATOR, which sends the client to
// find the coordinator again, rather than NOT_CONTROLLER, which this API does not expect.
func shareOffsetsErrCode(err error) int16 {
	var nl *broker.NotLeaderError
	if errors.As(err, &nl) && nl.Catalog {
		return kerr.NotCoordinator.Code
	}
	return errCode(err, nil)
}
