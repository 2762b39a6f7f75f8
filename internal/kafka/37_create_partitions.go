package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleCreatePartitions raises a topic's partition count. Keys remap (the
// partitioner hashes modulo the count), as in Kafka.
func handleCreatePartitions(_ context.Context, c *conn, req *kmsg.CreatePartitionsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err error
		switch {
		case !c.may(auth.Alter, auth.Topic, t.Topic):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case len(t.Assignment) > 0:
			rt.ErrorCode = kerr.InvalidReplicaAssignment.Code
			err = errors.New("manual replica assignment is not supported")
		case req.ValidateOnly:
			_, err = c.s.b.PartitionCount(t.Topic)
			rt.ErrorCode = errCode(err, nil)
		default:
			_, err = c.s.b.AddPartitions(t.Topic, t.Count)
			rt.ErrorCode = errCode(err, kerr.InvalidPartitions)
		}
		rt.ErrorMessage = errMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
