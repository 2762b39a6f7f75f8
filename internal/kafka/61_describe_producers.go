package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDescribeProducers lists each partition's idempotent producers:
// id, epoch and last sequence. sluice keeps no per-producer timestamp
// (last timestamp -1) and has no transactions (coordinator epoch and
// transaction start -1). It needs describe on the topic (Kafka's read:
// TOPIC_AUTHORIZATION_FAILED per partition).
func handleDescribeProducers(_ context.Context, c *conn, req *kmsg.DescribeProducersRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		denied := !c.may(auth.Describe, auth.Topic, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			if denied {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			prods, err := c.s.b.PartitionProducers(t.Topic, p)
			rp.ErrorCode, rp.ErrorMessage = errCode(err, nil), errMessage(err)
			open, _ := c.s.b.OpenTransactions(t.Topic, p)
			for _, a := range prods {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = a.ID, int32(a.Epoch), a.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1, -1
				if first, ok := open[a.ID]; ok {
					ap.CurrentTxnStartOffset = first // the transaction holding the LSO back
				}
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
