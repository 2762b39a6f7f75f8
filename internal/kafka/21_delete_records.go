package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDeleteRecords moves each partition's log start up to the offset asked (-1: the
// high watermark; kadm DeleteRecords, kafka-delete-records.sh), durably before
// answering, and answers the new log start as the low watermark. It needs delete on the
// topic (else TOPIC_AUTHORIZATION_FAILED). An offset past the high watermark is
// OFFSET_OUT_OF_RANGE, an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, a
// compact-only topic POLICY_VIOLATION. In a cluster it is answered by the partition's
// leader once every replica will apply it (NOT_LEADER_OR_FOLLOWER elsewhere, as Kafka;
// docs/cluster.md, "DeleteRecords"). Every refusal changes nothing. Subscriptions of the
// topic drop their records below the new start (broker.DeleteRecords).
func handleDeleteRecords(ctx context.Context, c *conn, req *kmsg.DeleteRecordsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		allowed := c.may(auth.Delete, auth.Topic, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			if !allowed {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if low, err := c.s.b.DeleteRecords(ctx, t.Topic, p.Partition, p.Offset); err != nil {
				rp.ErrorCode = errCode(err, nil)
			} else {
				rp.LowWatermark = low
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
