package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleOffsetDelete removes a group's committed offsets (kadm
// DeleteOffsets, kafka-consumer-groups --delete-offsets), durably before
// answering. An unknown group is GROUP_ID_NOT_FOUND; a topic a member of a
// non-Empty group subscribes to is GROUP_SUBSCRIBED_TO_TOPIC for its
// partitions, as in Kafka. It needs delete on the group and, as Kafka's read,
// consume on each topic (else TOPIC_AUTHORIZATION_FAILED per partition).
func handleOffsetDelete(_ context.Context, c *conn, req *kmsg.OffsetDeleteRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !c.may(auth.Delete, auth.Group, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	var tps []broker.TopicPartitions
	denied := make([]bool, len(req.Topics))
	for i, t := range req.Topics {
		denied[i] = !c.may(auth.Consume, auth.Topic, t.Topic)
		tp := broker.TopicPartitions{Topic: t.Topic}
		if !denied[i] {
			for _, p := range t.Partitions {
				tp.Partitions = append(tp.Partitions, p.Partition)
			}
		}
		tps = append(tps, tp)
	}
	errs, err := c.s.b.DeleteOffsets(req.Group, tps)
	if err != nil {
		resp.ErrorCode = errCode(err, nil)
		return msg(resp)
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if denied[i] {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else {
				rp.ErrorCode = errCode(errs[i][j], nil)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
