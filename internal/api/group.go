package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// groupService implements sluice.v1.GroupService over the broker's
// broker-assigned ("native") consumer groups; Kafka-protocol groups are
// listed, described and reset here, not joined.
type groupService struct{ *API }

var _ sluicev1connect.GroupServiceHandler = (*groupService)(nil)

// nativeProtocolType marks groups joined through this API (the broker's
// JoinConsumer uses it).
const nativeProtocolType = "sluice"

func gmeta(g string) map[string]string { return map[string]string{"group": g} }

func tpToProto(in []broker.TopicPartitions) []*sluicev1.TopicPartitions {
	out := make([]*sluicev1.TopicPartitions, len(in))
	for i, tp := range in {
		out[i] = &sluicev1.TopicPartitions{Topic: tp.Topic, Partitions: tp.Partitions}
	}
	return out
}

func (g *groupService) JoinGroup(ctx context.Context, req *connect.Request[sluicev1.JoinGroupRequest]) (*connect.Response[sluicev1.JoinGroupResponse], error) {
	m := req.Msg
	session, err := fromDur(m.GetSessionTimeout(), "session_timeout")
	if err != nil {
		return nil, err
	}
	pollCtx, cancel := g.untilDrain(ctx)
	defer cancel()
	a, err := g.b.JoinConsumer(pollCtx, broker.ConsumerJoin{Group: m.GetGroup(), MemberID: m.GetMemberId(),
		ClientID: m.GetClientId(), Topics: m.GetTopics(), SessionTimeout: session})
	if err != nil {
		return nil, g.toConnect(err, gmeta(m.GetGroup()))
	}
	if session == 0 {
		session = defaultSession
	}
	return connect.NewResponse(&sluicev1.JoinGroupResponse{MemberId: a.MemberID, Generation: a.Generation,
		Assignment: tpToProto(a.Partitions), HeartbeatInterval: durationpb.New(session / 3)}), nil
}

// defaultSession is the broker's default session timeout (JoinConsumer's),
// for the heartbeat interval a member is told.
const defaultSession = 30 * time.Second

func (g *groupService) Heartbeat(_ context.Context, req *connect.Request[sluicev1.HeartbeatRequest]) (*connect.Response[sluicev1.HeartbeatResponse], error) {
	m := req.Msg
	err := g.b.Heartbeat(broker.HeartbeatRequest{Group: m.GetGroup(), MemberID: m.GetMemberId(), Generation: m.GetGeneration()})
	switch {
	case errors.Is(err, broker.ErrRebalanceInProgress):
		return connect.NewResponse(&sluicev1.HeartbeatResponse{RebalanceRequired: true}), nil
	case err != nil:
		return nil, g.toConnect(err, gmeta(m.GetGroup()))
	}
	return connect.NewResponse(&sluicev1.HeartbeatResponse{}), nil
}

func (g *groupService) LeaveGroup(_ context.Context, req *connect.Request[sluicev1.LeaveGroupRequest]) (*connect.Response[sluicev1.LeaveGroupResponse], error) {
	m := req.Msg
	errs, err := g.b.LeaveGroup(m.GetGroup(), []broker.MemberRef{{MemberID: m.GetMemberId()}})
	if err == nil && len(errs) > 0 {
		err = errs[0]
	}
	if err != nil {
		return nil, g.toConnect(err, gmeta(m.GetGroup()))
	}
	return connect.NewResponse(&sluicev1.LeaveGroupResponse{}), nil
}

func (g *groupService) CommitOffsets(ctx context.Context, req *connect.Request[sluicev1.CommitOffsetsRequest]) (*connect.Response[sluicev1.CommitOffsetsResponse], error) {
	m := req.Msg
	cr := broker.CommitRequest{Group: m.GetGroup(), MemberID: m.GetMemberId(), Generation: m.GetGeneration()}
	for _, o := range m.GetOffsets() {
		cr.Offsets = append(cr.Offsets, broker.OffsetCommit{Topic: o.GetTopic(), Partition: o.GetPartition(),
			Offset: o.GetOffset(), LeaderEpoch: -1, Metadata: o.GetMetadata()})
	}
	errs, err := g.b.CommitOffsets(ctx, cr)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return nil, g.toConnect(err, gmeta(m.GetGroup()))
	}
	return connect.NewResponse(&sluicev1.CommitOffsetsResponse{}), nil
}

func (g *groupService) FetchOffsets(_ context.Context, req *connect.Request[sluicev1.FetchOffsetsRequest]) (*connect.Response[sluicev1.FetchOffsetsResponse], error) {
	m := req.Msg
	out := &sluicev1.FetchOffsetsResponse{}
	if len(m.GetPartitions()) == 0 {
		for _, o := range g.b.GroupOffsets(m.GetGroup()) {
			out.Offsets = append(out.Offsets, &sluicev1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata})
		}
		return connect.NewResponse(out), nil
	}
	for _, tp := range m.GetPartitions() {
		for _, p := range tp.GetPartitions() {
			c, ok := g.b.FetchOffset(m.GetGroup(), tp.GetTopic(), p)
			co := &sluicev1.CommittedOffset{Topic: tp.GetTopic(), Partition: p, Offset: -1}
			if ok {
				co.Offset, co.Metadata = c.Offset, c.Metadata
			}
			out.Offsets = append(out.Offsets, co)
		}
	}
	return connect.NewResponse(out), nil
}

func summaryProto(id string, st broker.GroupState, typ, protocolType string, members int) *sluicev1.GroupSummary {
	s := &sluicev1.GroupSummary{Group: id, Members: int32(members)}
	switch st {
	case broker.GroupEmpty:
		s.State = sluicev1.GroupState_GROUP_STATE_EMPTY
	case broker.GroupStable:
		s.State = sluicev1.GroupState_GROUP_STATE_STABLE
	case broker.GroupPreparingRebalance, broker.GroupCompletingRebalance, broker.GroupAssigning, broker.GroupReconciling:
		s.State = sluicev1.GroupState_GROUP_STATE_REBALANCING
	}
	switch {
	case typ == broker.GroupTypeConsumer:
		s.Protocol = sluicev1.GroupProtocol_GROUP_PROTOCOL_KAFKA_CONSUMER
	case protocolType == "": // only committed offsets: nobody has joined it
	case protocolType == nativeProtocolType:
		s.Protocol = sluicev1.GroupProtocol_GROUP_PROTOCOL_NATIVE
	default:
		s.Protocol = sluicev1.GroupProtocol_GROUP_PROTOCOL_KAFKA
	}
	return s
}

func (g *groupService) ListGroups(ctx context.Context, _ *connect.Request[sluicev1.ListGroupsRequest]) (*connect.Response[sluicev1.ListGroupsResponse], error) {
	out := &sluicev1.ListGroupsResponse{}
	for _, s := range g.b.ListGroups() {
		if !g.visible(ctx, groupRes(s.Group)) {
			continue
		}
		out.Groups = append(out.Groups, summaryProto(s.Group, s.State, s.Type, s.ProtocolType, s.Members))
	}
	return connect.NewResponse(out), nil
}

func (g *groupService) DescribeGroup(_ context.Context, req *connect.Request[sluicev1.DescribeGroupRequest]) (*connect.Response[sluicev1.DescribeGroupResponse], error) {
	id := req.Msg.GetGroup()
	info, ok := g.b.DescribeGroup(id)
	if !ok {
		return nil, apiError(connect.CodeNotFound, ReasonGroupNotFound, fmt.Errorf("group %s does not exist", id), gmeta(id))
	}
	out := &sluicev1.DescribeGroupResponse{
		Summary:    summaryProto(id, info.State, info.Type, info.ProtocolType, len(info.Members)),
		Generation: info.Generation, ProtocolType: info.ProtocolType,
		GroupEpoch: info.Epoch, AssignmentEpoch: info.AssignmentEpoch, Assignor: info.Assignor,
	}
	owner := map[string]string{}
	for _, mem := range info.Members {
		out.Members = append(out.Members, &sluicev1.GroupMember{MemberId: mem.MemberID, ClientId: mem.ClientID,
			Assignment: tpToProto(mem.Partitions), LastHeartbeatTime: ts(mem.LastSeen),
			MemberEpoch: mem.MemberEpoch, TargetAssignment: tpToProto(mem.Target), Revoking: tpToProto(mem.Revoking),
			InstanceId: mem.InstanceID})
		for _, tp := range mem.Partitions {
			for _, p := range tp.Partitions {
				owner[fmt.Sprintf("%s/%d", tp.Topic, p)] = mem.MemberID
			}
		}
	}
	lag, err := g.b.GroupLag(id)
	if err != nil {
		return nil, g.toConnect(err, gmeta(id))
	}
	for _, l := range lag.Partitions {
		out.Partitions = append(out.Partitions, &sluicev1.PartitionLag{Topic: l.Topic, Partition: l.Partition,
			CommittedOffset: l.Committed, HighWatermark: l.HighWatermark, LagMessages: l.Messages,
			Lag: durationpb.New(l.Age), MemberId: owner[fmt.Sprintf("%s/%d", l.Topic, l.Partition)]})
	}
	return connect.NewResponse(out), nil
}

func (g *groupService) ResetOffsets(_ context.Context, req *connect.Request[sluicev1.ResetOffsetsRequest]) (*connect.Response[sluicev1.ResetOffsetsResponse], error) {
	m := req.Msg
	var spec broker.ResetSpec
	switch to := m.GetTo().(type) {
	case *sluicev1.ResetOffsetsRequest_Earliest:
		spec.To = broker.ResetEarliest
	case *sluicev1.ResetOffsetsRequest_Latest:
		spec.To = broker.ResetLatest
	case *sluicev1.ResetOffsetsRequest_Offset:
		spec.To, spec.Offset = broker.ResetToOffset, to.Offset
	case *sluicev1.ResetOffsetsRequest_Time:
		spec.To, spec.Time = broker.ResetToTime, to.Time.AsTime()
	default:
		return nil, invalidArg(ReasonInvalidArgument, "to", "say where to: earliest, latest, offset or time", gmeta(m.GetGroup()))
	}
	if m.GetDryRun() {
		return g.previewReset(m, spec)
	}
	parts := m.GetPartitions()
	if len(parts) == 0 {
		parts = nil
	}
	offs, err := g.b.ResetGroupOffsets(m.GetGroup(), m.GetTopic(), parts, spec)
	if err != nil {
		return nil, g.toConnect(err, map[string]string{"group": m.GetGroup(), "topic": m.GetTopic()})
	}
	out := &sluicev1.ResetOffsetsResponse{}
	for _, o := range offs {
		out.Offsets = append(out.Offsets, &sluicev1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	return connect.NewResponse(out), nil
}

// previewReset computes what a reset would set, without committing: the
// same resolution as the broker's (log start, high watermark, clamped
// offset, first offset at or after a time), read through ListOffsets.
func (g *groupService) previewReset(m *sluicev1.ResetOffsetsRequest, spec broker.ResetSpec) (*connect.Response[sluicev1.ResetOffsetsResponse], error) {
	parts, err := g.partitions(m.GetTopic(), m.GetPartitions())
	if err != nil {
		return nil, err
	}
	out := &sluicev1.ResetOffsetsResponse{}
	for _, p := range parts {
		start, err := g.b.ListOffsets(m.GetTopic(), p, broker.OffsetEarliest)
		if err != nil {
			return nil, g.toConnect(err, pmeta(m.GetTopic(), p))
		}
		end, _ := g.b.ListOffsets(m.GetTopic(), p, broker.OffsetLatest)
		off := end.Offset
		switch spec.To {
		case broker.ResetEarliest:
			off = start.Offset
		case broker.ResetToOffset:
			off = min(max(spec.Offset, start.Offset), end.Offset)
		case broker.ResetToTime:
			if at, err := g.b.ListOffsets(m.GetTopic(), p, spec.Time.UnixMilli()); err == nil && at.Offset >= 0 {
				off = max(at.Offset, start.Offset)
			}
		}
		out.Offsets = append(out.Offsets, &sluicev1.CommittedOffset{Topic: m.GetTopic(), Partition: p, Offset: off})
	}
	return connect.NewResponse(out), nil
}
