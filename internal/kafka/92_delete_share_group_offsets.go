package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDeleteShareGroupOffsets deletes an empty group's state for topics:
// its subscriptions of them.
func handleDeleteShareGroupOffsets(_ context.Context, c *conn, req *kmsg.DeleteShareGroupOffsetsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if !c.may(auth.Delete, auth.Group, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		s, ok := c.topicSettings(t.Topic)
		if ok {
			rt.TopicID = topicID(s)
		}
		if !ok || !c.may(auth.Consume, auth.Topic, t.Topic) {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else if err := c.s.b.DeleteShareGroupOffsets(req.GroupID, t.Topic); err != nil {
			rt.ErrorCode, rt.ErrorMessage = errCode(err, nil), errMessage(err)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
