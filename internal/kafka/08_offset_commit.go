package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// handleOffsetCommit commits offsets, fenced by member id and generation
// (see package group). v0 carries neither: it commits as a tool managing
// offsets by hand (generation -1), which only an Empty group accepts.
// Answers once the offsets are durable.
func handleOffsetCommit(ctx context.Context, c *conn, req *kmsg.OffsetCommitRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := broker.CommitRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if req.Version == 0 {
		cr.MemberID, cr.Generation = "", -1
	}
	if req.InstanceID != nil {
		cr.InstanceID = *req.InstanceID
	}
	for _, t := range req.Topics {
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
	errs, err := c.s.b.CommitOffsets(ctx, cr)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if err != nil {
				rp.ErrorCode = errCode(err, nil) // the whole request was refused
			} else {
				rp.ErrorCode = errCode(errs[i], nil)
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
