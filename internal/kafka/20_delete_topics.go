package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDeleteTopics deletes topics by name (v0-4 name them; ids came in
// v6). Groups consuming a deleted topic rebalance; what happens to their
// committed offsets is the broker's rule (see broker.DeleteTopic).
func handleDeleteTopics(_ context.Context, c *conn, req *kmsg.DeleteTopicsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, name := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = &name
		if !c.may(auth.Delete, auth.Topic, name) {
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		err := c.s.b.DeleteTopic(name)
		rt.ErrorCode, rt.ErrorMessage = errCode(err, nil), errMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
