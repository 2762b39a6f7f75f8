package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleTxnOffsetCommit holds a group's offsets in the producer's open
// transaction: checked now as a commit of the member would be (v3+ carry
// the member and generation, KIP-447), visible to OffsetFetch only once
// the transaction commits, dropped if it aborts. One answer for all
// partitions: the request is one step of the transaction. v5 (KIP-890
// part 2) adds the group to the transaction itself, beginning one if none
// is open (no AddOffsetsToTxn before it), and answers
// TRANSACTION_ABORTABLE to a producer the coordinator's timeout aborted.
//
// v6 (KIP-1319) names topics by id only, as OffsetCommit v10 does: an id
// that names no topic answers UNKNOWN_TOPIC_ID for its partitions and
// holds nothing, while the other topics get the one answer; a request
// whose every topic is unknown does not reach the transaction (a v5+ one
// adds no group to it).
func handleTxnOffsetCommit(_ context.Context, c *conn, req *kmsg.TxnOffsetCommitRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	code := int16(0)
	cr := broker.CommitRequest{Group: req.Group, MemberID: req.MemberID, Generation: -1}
	if req.Version >= 3 {
		cr.Generation = req.Generation
		if req.InstanceID != nil {
			cr.InstanceID = *req.InstanceID
		}
	}
	unknown := map[int]bool{} // index in req.Topics: a v6 id that names no topic
	if req.Version >= 6 {
		for i := range req.Topics {
			name, ok := c.topicNameByID(req.Topics[i].TopicID)
			req.Topics[i].Topic = name
			unknown[i] = !ok
		}
	}
	denied := map[string]bool{}
	for i, t := range req.Topics {
		if unknown[i] {
			continue
		}
		denied[t.Topic] = denied[t.Topic] || !c.may(auth.Consume, auth.Topic, t.Topic)
		for _, p := range t.Partitions {
			oc := broker.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if req.Version >= 2 {
				oc.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				oc.Metadata = *p.Metadata
			}
			cr.Offsets = append(cr.Offsets, oc)
		}
	}
	whole := true // the code answers every partition, unknown ids too
	switch {
	case !c.mayIdempotent():
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !c.may(auth.Consume, auth.Group, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	default:
		whole = false
		for _, d := range denied {
			if d {
				code = kerr.TopicAuthorizationFailed.Code
			}
		}
	}
	allUnknown := len(req.Topics) > 0 && len(denied) == 0 // denied lists every known topic
	if code == 0 && !allUnknown {
		code = errCode(c.s.b.TxnOffsetCommit(req.TransactionalID, req.ProducerID, req.ProducerEpoch, cr, req.Version >= 5), nil)
	}
	for i, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			if unknown[i] && !whole {
				rp.ErrorCode = kerr.UnknownTopicID.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
