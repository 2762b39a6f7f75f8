package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDeleteTopics deletes topics by name (v0-4 name them; ids came in
// v6). Committed group offsets of a deleted topic are dropped by the
// broker.
func handleDeleteTopics(_ context.Context, c *conn, req *kmsg.DeleteTopicsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, name := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = &name
		err := c.s.b.DeleteTopic(name)
		rt.ErrorCode, rt.ErrorMessage = errCode(err, nil), errMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
