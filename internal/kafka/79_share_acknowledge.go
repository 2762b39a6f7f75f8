package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleShareAcknowledge settles acknowledgements outside a fetch (and,
// with epoch -1, closes the session).
func handleShareAcknowledge(ctx context.Context, c *conn, req *kmsg.ShareAcknowledgeRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	r, code := c.newShareReq(req.GroupID, req.MemberID, req.ShareSessionEpoch)
	if code != 0 {
		resp.ErrorCode = code
		return msg(resp)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sp, ok := c.sharePartition(r, t.TopicID, p.Partition)
			if !ok {
				continue
			}
			for _, b := range p.AcknowledgementBatches {
				r.br.Acks[sp] = append(r.br.Acks[sp], shareBatch(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes))
			}
		}
	}
	r.br.NoFetch, r.br.Acknowledge = true, true
	res := c.s.b.ShareFetch(ctx, r.br)
	if res.Err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(res.Err, nil), errMessage(res.Err)
		return msg(resp)
	}
	resp.AcquisitionLockTimeoutMillis = int32(res.LockDuration / time.Millisecond)
	topics := newTopicsByID(&resp.Topics, func(id [16]byte) kmsg.ShareAcknowledgeResponseTopic {
		t := kmsg.NewShareAcknowledgeResponseTopic()
		t.TopicID = id
		return t
	})
	add := func(id [16]byte, p kmsg.ShareAcknowledgeResponseTopicPartition) {
		t := topics.get(id)
		t.Partitions = append(t.Partitions, p)
	}
	for sp, code := range r.bad {
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition, p.ErrorCode = sp.Partition, code
		add(r.ids[sp.Topic], p)
	}
	endpoints := map[int32]bool{}
	for _, pr := range res.Parts {
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition = pr.Partition
		p.ErrorCode, p.ErrorMessage = errCode(pr.AckErr, nil), errMessage(pr.AckErr)
		if leader, epoch, ep, ok := c.shareLeaderHint(pr.AckErr, pr.Topic, pr.Partition); ok {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
			if !endpoints[leader] {
				endpoints[leader] = true
				resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareAcknowledgeResponseNodeEndpoint{NodeID: ep.NodeID, Host: ep.Host, Port: ep.Port})
			}
		}
		add(r.ids[pr.Topic], p)
	}
	return msg(resp)
}
