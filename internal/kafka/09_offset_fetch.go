package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleOffsetFetch returns a group's committed offsets: of the listed
// partitions, or (v2+, topics null) all of them. v8+ (KIP-709) asks for
// several groups in one request and answers each group apart. A partition
// with no commit answers offset -1, which tells the client to apply its
// reset policy. It needs describe on the group (GROUP_AUTHORIZATION_FAILED)
// and on each listed topic (TOPIC_AUTHORIZATION_FAILED); "all" leaves out
// the topics the principal may not describe. v10 names topics by id only
// (UNKNOWN_TOPIC_ID for an id that names no topic).
func handleOffsetFetch(ctx context.Context, c *conn, req *kmsg.OffsetFetchRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		var idOf map[string][16]byte // v10: every topic's id, listed once per request
		for _, g := range req.Groups {
			var topics []offsetFetchTopic
			var unknown []kmsg.OffsetFetchRequestGroupTopic // v10: ids that name no topic
			for _, t := range g.Topics {
				if req.Version >= 10 {
					name, ok := c.topicNameByID(t.TopicID)
					if !ok {
						unknown = append(unknown, t)
						continue
					}
					t.Topic = name
				}
				topics = append(topics, offsetFetchTopic{t.Topic, t.Partitions})
			}
			code, got := c.fetchGroupOffsets(ctx, g.Group, topics, g.Topics == nil)
			if req.Version >= 9 && code == 0 {
				// KIP-848: a member reads at its current epoch.
				member := ""
				if g.MemberID != nil {
					member = *g.MemberID
				}
				if err := c.s.b.CheckOffsetFetch(g.Group, member, g.MemberEpoch); err != nil {
					code, got = errCode(err, nil), nil
				}
			}
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			for _, t := range got {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				if req.Version >= 10 {
					if idOf == nil {
						idOf = c.topicIDsByName()
					}
					rt.TopicID = idOf[t.Topic]
				}
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			for _, t := range unknown {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.TopicID = t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, kerr.UnknownTopicID.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return msg(resp)
	}
	var topics []offsetFetchTopic
	for _, t := range req.Topics {
		topics = append(topics, offsetFetchTopic{t.Topic, t.Partitions})
	}
	resp.ErrorCode, resp.Topics = c.fetchGroupOffsets(ctx, req.Group, topics, req.Topics == nil && req.Version >= 2)
	return msg(resp)
}

// offsetFetchTopic is one topic asked for, in any version's form.
type offsetFetchTopic struct {
	topic      string
	partitions []int32
}

// fetchGroupOffsets answers one group: its error code and its topics. A
// refusal of the group (not authorized; NOT_COORDINATOR) is also set on
// every listed partition, because v0-1 carry the error per partition only.
func (c *conn) fetchGroupOffsets(ctx context.Context, group string, topics []offsetFetchTopic, all bool) (int16, []kmsg.OffsetFetchResponseTopic) {
	if group == "" {
		return errCode(errInvalidGroupID, nil), nil
	}
	code := int16(0)
	if !c.may(auth.Describe, auth.Group, group) {
		code = kerr.GroupAuthorizationFailed.Code
	} else if err := c.s.b.ConfirmCoordinator(ctx); err != nil {
		// In a cluster: on a node other than the controller, or one that could not
		// commit the read's barrier (cut off from the others).
		code = errCode(err, nil)
	}
	if code != 0 {
		var out []kmsg.OffsetFetchResponseTopic
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.topic
			for _, p := range t.partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out = append(out, rt)
		}
		return code, out
	}
	if all {
		return 0, c.allOffsets(group)
	}
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.topic
		denied := !c.may(auth.Describe, auth.Topic, t.topic)
		for _, p := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			empty := ""
			rp.Metadata = &empty
			if denied {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if got, ok := c.s.b.FetchOffset(group, t.topic, p); ok {
				rp.Offset, rp.LeaderEpoch, rp.Metadata = got.Offset, got.LeaderEpoch, &got.Metadata
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return 0, out
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
