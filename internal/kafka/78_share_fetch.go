package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// defaultShareMaxRecords is ShareFetch v0's limit, which has no MaxRecords
// (Kafka's max.poll.records default).
const defaultShareMaxRecords = 500

// shareReq is what ShareFetch and ShareAcknowledge have in common, turned
// into the broker's request: topic ids into names, partitions checked.
type shareReq struct {
	br  broker.ShareFetchRequest
	bad map[broker.SharePartition]int16 // refused partitions, with their code
	ids map[string][16]byte
}

func (c *conn) newShareReq(group, member *string, epoch int32) (*shareReq, int16) {
	r := &shareReq{bad: map[broker.SharePartition]int16{}, ids: map[string][16]byte{},
		br: broker.ShareFetchRequest{SessionEpoch: epoch, Acks: map[broker.SharePartition][]broker.ShareAckBatch{}}}
	switch {
	case group == nil || *group == "":
		return nil, kerr.InvalidGroupID.Code
	case member == nil || *member == "":
		return nil, kerr.UnknownMemberID.Code
	case !c.may(auth.Consume, auth.Group, *group):
		return nil, kerr.GroupAuthorizationFailed.Code
	}
	r.br.Group, r.br.MemberID = *group, *member
	return r, 0
}

// partition resolves one partition of a request; ok is false when it is
// refused (and recorded so in bad).
func (c *conn) sharePartition(r *shareReq, id [16]byte, p int32) (broker.SharePartition, bool) {
	name, ok := c.topicNameByID(id)
	if !ok {
		r.bad[broker.SharePartition{Partition: p}] = kerr.UnknownTopicID.Code
		return broker.SharePartition{}, false
	}
	sp := broker.SharePartition{Topic: name, Partition: p}
	r.ids[name] = id
	s, ok := c.topicSettings(name)
	switch {
	case !ok || p < 0 || p >= s.Partitions:
		r.bad[sp] = kerr.UnknownTopicOrPartition.Code
	case !c.mayFetch(name):
		r.bad[sp] = kerr.TopicAuthorizationFailed.Code
	default:
		return sp, true
	}
	return sp, false
}

func shareBatch(first, last int64, types []int8) broker.ShareAckBatch {
	return broker.ShareAckBatch{First: first, Last: last, Types: types}
}

// handleShareFetch serves ShareFetch: acknowledgements first, then
// acquisition of records for the member's share session.
func handleShareFetch(ctx context.Context, c *conn, req *kmsg.ShareFetchRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
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
			r.br.Add = append(r.br.Add, sp)
			for _, b := range p.AcknowledgementBatches {
				r.br.Acks[sp] = append(r.br.Acks[sp], shareBatch(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes))
			}
		}
	}
	for _, f := range req.ForgottenTopicsData {
		if name, ok := c.topicNameByID(f.TopicID); ok {
			for _, p := range f.Partitions {
				r.br.Forget = append(r.br.Forget, broker.SharePartition{Topic: name, Partition: p})
			}
		}
	}
	r.br.MaxWait = time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	r.br.MaxRecords = defaultShareMaxRecords
	if req.Version >= 1 && req.MaxRecords > 0 {
		r.br.MaxRecords = int(req.MaxRecords)
	}
	r.br.NoFetch = req.IsRenewAck || req.ShareSessionEpoch == -1
	r.br.Conn = c.id
	res := c.s.b.ShareFetch(ctx, r.br)
	if res.Err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(res.Err, nil), errMessage(res.Err)
		return msg(resp)
	}
	if req.ShareSessionEpoch == 0 {
		if c.shareSessions == nil {
			c.shareSessions = map[broker.ShareMember]bool{}
		}
		c.shareSessions[broker.ShareMember{Group: r.br.Group, MemberID: r.br.MemberID}] = true
	}
	resp.AcquisitionLockTimeoutMillis = int32(res.LockDuration / time.Millisecond)
	topics := newTopicsByID(&resp.Topics, func(id [16]byte) kmsg.ShareFetchResponseTopic {
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = id
		return t
	})
	add := func(id [16]byte, p kmsg.ShareFetchResponseTopicPartition) {
		t := topics.get(id)
		t.Partitions = append(t.Partitions, p)
	}
	for sp, code := range r.bad {
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition, p.ErrorCode = sp.Partition, code
		add(r.ids[sp.Topic], p)
	}
	endpoints := map[int32]bool{}
	for _, pr := range res.Parts {
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition, p.Records = pr.Partition, pr.Records
		p.ErrorCode, p.ErrorMessage = errCode(pr.Err, nil), errMessage(pr.Err)
		if leader, epoch, ep, ok := c.shareLeaderHint(pr.Err, pr.Topic, pr.Partition); ok {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
			if !endpoints[leader] {
				endpoints[leader] = true
				resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: ep.NodeID, Host: ep.Host, Port: ep.Port})
			}
		}
		p.AcknowledgeErrorCode, p.AcknowledgeErrorMessage = errCode(pr.AckErr, nil), errMessage(pr.AckErr)
		for _, a := range pr.Acquired {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
			p.AcquiredRecords = append(p.AcquiredRecords, ar)
		}
		id, ok := r.ids[pr.Topic]
		if !ok {
			s, _ := c.topicSettings(pr.Topic)
			id = topicID(s)
		}
		add(id, p)
	}
	return msg(resp)
}

// endShareSessions ends the share sessions this connection opened, as
// Kafka does when a share session's connection closes: their records are
// released at once rather than when their locks run out.
func (c *conn) endShareSessions() {
	if len(c.shareSessions) == 0 {
		return
	}
	ms := make([]broker.ShareMember, 0, len(c.shareSessions))
	for m := range c.shareSessions {
		ms = append(ms, m)
	}
	c.s.b.ShareConnClosed(c.id, ms)
}
