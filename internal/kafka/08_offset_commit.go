package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleOffsetCommit commits offsets, fenced by member id and generation
// (see package group). v0 carries neither: it commits as a tool managing
// offsets by hand (generation -1), which only an Empty group accepts.
// Answers once the offsets are durable. It needs consume on the group
// (else GROUP_AUTHORIZATION_FAILED for every partition) and on each topic
// (else TOPIC_AUTHORIZATION_FAILED for its partitions, the others commit).
//
// v10 names topics by id only: an id that names no topic answers
// UNKNOWN_TOPIC_ID for its partitions, and the others commit.
func handleOffsetCommit(ctx context.Context, c *conn, req *kmsg.OffsetCommitRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	groupOK := c.may(auth.Consume, auth.Group, req.Group)
	unknown := map[int]bool{} // index in req.Topics: a v10 id that names no topic
	if req.Version >= 10 {
		for i := range req.Topics {
			name, ok := c.topicNameByID(req.Topics[i].TopicID)
			req.Topics[i].Topic = name
			unknown[i] = !ok
		}
	}
	denied := map[string]bool{}
	for i, t := range req.Topics {
		if _, seen := denied[t.Topic]; !seen && groupOK && !unknown[i] {
			denied[t.Topic] = !c.may(auth.Consume, auth.Topic, t.Topic)
		}
	}
	// v9+ carry a KIP-848 member epoch in Generation; members of consumer
	// groups must use them (Classic marks the older versions).
	cr := broker.CommitRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation, Classic: req.Version < 9}
	if req.Version == 0 {
		cr.MemberID, cr.Generation = "", -1
	}
	if req.InstanceID != nil {
		cr.InstanceID = *req.InstanceID
	}
	for i, t := range req.Topics {
		if !groupOK || unknown[i] || denied[t.Topic] {
			continue
		}
		for _, p := range t.Partitions {
			oc := broker.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch}
			if req.Version < 6 {
				oc.LeaderEpoch = -1
			}
			if p.Metadata != nil {
				oc.Metadata = *p.Metadata
			}
			cr.Offsets = append(cr.Offsets, oc)
		}
	}
	var errs []error
	var err error
	if len(cr.Offsets) > 0 {
		errs, err = c.s.b.CommitOffsets(ctx, cr)
	}
	i := 0
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !groupOK:
				rp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			case unknown[ti]:
				rp.ErrorCode = kerr.UnknownTopicID.Code
			case denied[t.Topic]:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case err != nil:
				rp.ErrorCode = errCode(err, nil) // the whole request was refused
				i++
			default:
				rp.ErrorCode = errCode(errs[i], nil)
				i++
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
