package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleOffsetFetch returns a group's committed offsets: of the listed
// partitions, or (v2+, topics null) all of them. A partition with no
// commit answers offset -1, which tells the client to apply its reset
// policy. It needs describe on the group (GROUP_AUTHORIZATION_FAILED) and
// on each listed topic (TOPIC_AUTHORIZATION_FAILED); "all" leaves out the
// topics the principal may not describe.
func handleOffsetFetch(_ context.Context, c *conn, req *kmsg.OffsetFetchRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Group == "" {
		resp.ErrorCode = errCode(errInvalidGroupID, nil)
		return msg(resp)
	}
	if !c.may(auth.Describe, auth.Group, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		for _, t := range req.Topics { // v0-1 carry the error per partition only
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, kerr.GroupAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return msg(resp)
	}
	if req.Topics == nil && req.Version >= 2 {
		resp.Topics = c.allOffsets(req.Group)
		return msg(resp)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		denied := !c.may(auth.Describe, auth.Topic, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			empty := ""
			rp.Metadata = &empty
			if denied {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if got, ok := c.s.b.FetchOffset(req.Group, t.Topic, p); ok {
				rp.Offset, rp.LeaderEpoch, rp.Metadata = got.Offset, got.LeaderEpoch, &got.Metadata
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}

func (c *conn) allOffsets(groupID string) []kmsg.OffsetFetchResponseTopic {
	var out []kmsg.OffsetFetchResponseTopic
	for _, o := range c.s.b.GroupOffsets(groupID) {
		if !c.sees(auth.Topic, o.Topic) {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Topic != o.Topic {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = o.Topic
			out = append(out, rt)
		}
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = o.Partition, o.Offset, o.LeaderEpoch
		md := o.Metadata
		rp.Metadata = &md
		rt := &out[len(out)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return out
}
