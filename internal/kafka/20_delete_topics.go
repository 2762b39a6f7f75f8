package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDeleteTopics deletes topics: by name in v0-5 (TopicNames), by name
// or topic id in v6+ (Topics; an id no topic has answers UNKNOWN_TOPIC_ID).
// Groups consuming a deleted topic rebalance; what happens to their
// committed offsets is the broker's rule (see broker.DeleteTopic).
func handleDeleteTopics(_ context.Context, c *conn, req *kmsg.DeleteTopicsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	if req.Version < 6 {
		for _, name := range req.TopicNames {
			resp.Topics = append(resp.Topics, c.deleteTopic(name))
		}
		return msg(resp)
	}
	for _, t := range req.Topics {
		if t.Topic != nil && *t.Topic != "" {
			rt := c.deleteTopic(*t.Topic)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		name, ok := c.topicNameByID(t.TopicID)
		if !ok {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.TopicID, rt.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		resp.Topics = append(resp.Topics, c.deleteTopic(name))
	}
	return msg(resp)
}

// deleteTopic deletes one topic by name and answers it, with its id (v6+)
// when it had one.
func (c *conn) deleteTopic(name string) kmsg.DeleteTopicsResponseTopic {
	rt := kmsg.NewDeleteTopicsResponseTopic()
	rt.Topic = &name
	if !c.may(auth.Delete, auth.Topic, name) {
		rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		return rt
	}
	if info, err := c.s.b.DescribeTopic(name); err == nil {
		rt.TopicID = topicID(info.Settings)
	}
	err := c.s.b.DeleteTopic(name)
	rt.ErrorCode, rt.ErrorMessage = errCode(err, nil), errMessage(err)
	return rt
}
