package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleAlterShareGroupOffsets moves share-partitions' start offsets of an
// empty group forward (NON_EMPTY_GROUP while it has members).
func handleAlterShareGroupOffsets(_ context.Context, c *conn, req *kmsg.AlterShareGroupOffsetsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if !c.may(auth.Consume, auth.Group, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		s, ok := c.topicSettings(t.Topic)
		if ok {
			rt.TopicID = topicID(s)
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			if !ok || !c.may(auth.Consume, auth.Topic, t.Topic) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if err := c.s.b.AlterShareGroupOffset(req.GroupID, t.Topic, p.Partition, p.StartOffset); err != nil {
				rp.ErrorCode, rp.ErrorMessage = errCode(err, nil), errMessage(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
