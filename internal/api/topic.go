package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// topicService implements sluice.v1.TopicService: topic admin here, records
// in topic_records.go. Subscriptions answer `unimplemented` until the
// broker has them.
type topicService struct {
	*API
	sluicev1connect.UnimplementedTopicServiceHandler
}

var _ sluicev1connect.TopicServiceHandler = (*topicService)(nil)

func tmeta(name string) map[string]string { return map[string]string{"topic": name} }

func topicSettings(name string, c *sluicev1.TopicConfig) (broker.TopicSettings, error) {
	s := broker.TopicSettings{Name: name}
	if c == nil {
		return s, nil
	}
	s.Partitions, s.RetentionBytes, s.MaxMessageBytes = c.Partitions, c.RetentionBytes, int(c.MaxMessageBytes)
	if c.Retention != nil {
		d, err := fromDur(c.Retention, "retention")
		if err != nil {
			return s, err
		}
		// The schema's explicit 0 keeps records forever; the broker spells
		// that negative (its 0 means the default).
		if s.Retention = d; d == 0 {
			s.Retention = -1
		}
	}
	switch c.CleanupPolicy {
	case sluicev1.CleanupPolicy_CLEANUP_POLICY_UNSPECIFIED, sluicev1.CleanupPolicy_CLEANUP_POLICY_DELETE:
		s.CleanupPolicy = broker.CleanupDelete
	case sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT:
		s.CleanupPolicy = broker.CleanupCompact
	case sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT_DELETE:
		s.CleanupPolicy = broker.CleanupCompactDelete
	default:
		s.CleanupPolicy = c.CleanupPolicy.String() // refused by the broker as unknown
	}
	return s, compactionFromConfig(&s, c)
}

// compactionFromConfig reads the compaction fields. The broker keeps 0 for
// "the default", so an explicit 0 delete retention or dirty ratio is its
// negative; a negative duration is refused here, as Kafka refuses one.
func compactionFromConfig(s *broker.TopicSettings, c *sluicev1.TopicConfig) error {
	for _, f := range []struct {
		d     *durationpb.Duration
		name  string
		to    *time.Duration
		zero  time.Duration // what an explicit 0 is stored as
		least time.Duration
	}{
		{c.DeleteRetention, "delete_retention", &s.DeleteRetention, -1, 0},
		{c.MinCompactionLag, "min_compaction_lag", &s.MinCompactionLag, 0, 0},
		{c.MaxCompactionLag, "max_compaction_lag", &s.MaxCompactionLag, 0, time.Millisecond},
	} {
		if f.d == nil {
			continue
		}
		d, err := fromDur(f.d, f.name)
		if err != nil {
			return err
		}
		if d < f.least {
			return invalidArg(ReasonInvalidArgument, f.name, fmt.Sprintf("%s %v: want at least %v", f.name, d, f.least), tmeta(s.Name))
		}
		if *f.to = d; d == 0 {
			*f.to = f.zero
		}
	}
	if c.MinCleanableDirtyRatio != nil {
		if s.MinCleanableDirtyRatio = c.GetMinCleanableDirtyRatio(); s.MinCleanableDirtyRatio == 0 {
			s.MinCleanableDirtyRatio = -1
		}
	}
	return nil
}

// cleanupPolicy is the schema's spelling of the broker's policy.
func cleanupPolicy(p string) sluicev1.CleanupPolicy {
	switch p {
	case broker.CleanupCompact:
		return sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT
	case broker.CleanupCompactDelete:
		return sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT_DELETE
	}
	return sluicev1.CleanupPolicy_CLEANUP_POLICY_DELETE
}

func topicConfig(s broker.TopicSettings) *sluicev1.TopicConfig {
	c := &sluicev1.TopicConfig{Partitions: s.Partitions, RetentionBytes: max(0, s.RetentionBytes),
		MaxMessageBytes: int64(s.MaxMessageBytes), CleanupPolicy: cleanupPolicy(s.CleanupPolicy),
		DeleteRetention: dur(max(0, s.DeleteRetention)), MinCompactionLag: dur(s.MinCompactionLag)}
	if s.DeleteRetention == 0 {
		c.DeleteRetention = dur(broker.DefaultDeleteRetention)
	}
	if s.MaxCompactionLag > 0 {
		c.MaxCompactionLag = dur(s.MaxCompactionLag)
	}
	ratio := s.MinCleanableDirtyRatio
	switch {
	case ratio == 0:
		ratio = broker.DefaultMinCleanableDirtyRatio
	case ratio < 0:
		ratio = 0
	}
	c.MinCleanableDirtyRatio = &ratio
	if s.Retention > 0 {
		c.Retention = dur(s.Retention)
	} else {
		c.Retention = dur(0)
	}
	return c
}

// sameTopicConfig reports whether every field the request set matches the
// existing topic, which makes a repeated CreateTopic idempotent.
func sameTopicConfig(want, have broker.TopicSettings) bool {
	return (want.Partitions == 0 || want.Partitions == have.Partitions) &&
		(want.Retention == 0 || want.Retention == have.Retention) &&
		(want.RetentionBytes == 0 || want.RetentionBytes == have.RetentionBytes) &&
		(want.MaxMessageBytes == 0 || want.MaxMessageBytes == have.MaxMessageBytes)
}

func (a *API) topicProto(name string, full bool) (*sluicev1.Topic, error) {
	info, err := a.b.DescribeTopic(name)
	if err != nil {
		return nil, a.toConnect(err, tmeta(name))
	}
	out := &sluicev1.Topic{Name: name, Config: topicConfig(info.Settings), CreateTime: ts(info.Settings.CreatedAt)}
	if !full {
		return out, nil
	}
	for _, p := range info.Partitions {
		out.Partitions = append(out.Partitions, &sluicev1.PartitionInfo{Partition: p.Partition,
			LogStartOffset: p.LogStartOffset, HighWatermark: p.HighWatermark, SizeBytes: p.SizeBytes})
	}
	for _, s := range info.Subscriptions {
		out.Subscriptions = append(out.Subscriptions, &sluicev1.Subscription{Topic: name, Name: s})
	}
	return out, nil
}

func (t *topicService) CreateTopic(_ context.Context, req *connect.Request[sluicev1.CreateTopicRequest]) (*connect.Response[sluicev1.CreateTopicResponse], error) {
	name := req.Msg.GetName()
	s, err := topicSettings(name, req.Msg.GetConfig())
	if err != nil {
		return nil, err
	}
	if _, err := t.b.CreateTopic(s); err != nil {
		info, derr := t.b.DescribeTopic(name)
		if connect.CodeOf(t.toConnect(err, nil)) != connect.CodeAlreadyExists || derr != nil || !sameTopicConfig(s, info.Settings) {
			return nil, t.toConnect(err, tmeta(name))
		}
	}
	out, err := t.topicProto(name, true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.CreateTopicResponse{Topic: out}), nil
}

func (t *topicService) ListTopics(ctx context.Context, req *connect.Request[sluicev1.ListTopicsRequest]) (*connect.Response[sluicev1.ListTopicsResponse], error) {
	all := t.b.ListTopics(req.Msg.GetPrefix())
	names := make([]string, 0, len(all))
	byName := map[string]broker.TopicSettings{}
	for _, s := range all {
		if t.visible(ctx, topicRes(s.Name)) { // before paging, so pages are full
			names, byName[s.Name] = append(names, s.Name), s
		}
	}
	names, next, err := page(names, req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	out := &sluicev1.ListTopicsResponse{NextPageToken: next}
	for _, n := range names {
		s := byName[n]
		out.Topics = append(out.Topics, &sluicev1.Topic{Name: n, Config: topicConfig(s), CreateTime: ts(s.CreatedAt)})
	}
	return connect.NewResponse(out), nil
}

func (t *topicService) DescribeTopic(_ context.Context, req *connect.Request[sluicev1.DescribeTopicRequest]) (*connect.Response[sluicev1.DescribeTopicResponse], error) {
	out, err := t.topicProto(req.Msg.GetName(), true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.DescribeTopicResponse{Topic: out}), nil
}

func (t *topicService) DeleteTopic(_ context.Context, req *connect.Request[sluicev1.DeleteTopicRequest]) (*connect.Response[sluicev1.DeleteTopicResponse], error) {
	if err := t.b.DeleteTopic(req.Msg.GetName()); err != nil {
		return nil, t.toConnect(err, tmeta(req.Msg.GetName()))
	}
	return connect.NewResponse(&sluicev1.DeleteTopicResponse{}), nil
}

func (t *topicService) AddPartitions(_ context.Context, req *connect.Request[sluicev1.AddPartitionsRequest]) (*connect.Response[sluicev1.AddPartitionsResponse], error) {
	name := req.Msg.GetTopic()
	n, err := t.b.PartitionCount(name)
	if err != nil {
		return nil, t.toConnect(err, tmeta(name))
	}
	if req.Msg.GetPartitions() < n {
		return nil, invalidArg(ReasonPartitionsShrink, "partitions",
			fmt.Sprintf("topic %s has %d partitions; a topic never shrinks", name, n), tmeta(name))
	}
	if req.Msg.GetPartitions() > n {
		if _, err := t.b.AddPartitions(name, req.Msg.GetPartitions()); err != nil {
			return nil, t.toConnect(err, tmeta(name))
		}
	}
	out, err := t.topicProto(name, true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sluicev1.AddPartitionsResponse{Topic: out}), nil
}

func (t *topicService) InitProducer(_ context.Context, req *connect.Request[sluicev1.InitProducerRequest]) (*connect.Response[sluicev1.InitProducerResponse], error) {
	id, err := t.b.InitProducerID(req.Msg.GetProducerName())
	if err != nil {
		return nil, t.toConnect(err, nil)
	}
	return connect.NewResponse(&sluicev1.InitProducerResponse{ProducerId: id.ID, ProducerEpoch: int32(id.Epoch)}), nil
}

func (t *topicService) ListOffsets(ctx context.Context, req *connect.Request[sluicev1.ListOffsetsRequest]) (*connect.Response[sluicev1.ListOffsetsResponse], error) {
	name := req.Msg.GetTopic()
	parts, err := t.partitions(name, req.Msg.GetPartitions())
	if err != nil {
		return nil, err
	}
	at := broker.OffsetLatest
	switch spec := req.Msg.GetSpec().(type) {
	case *sluicev1.ListOffsetsRequest_Earliest:
		at = broker.OffsetEarliest
	case *sluicev1.ListOffsetsRequest_Time:
		at = spec.Time.AsTime().UnixMilli()
	}
	out := &sluicev1.ListOffsetsResponse{}
	// Partitions led elsewhere, by leader (topic_fanout.go), and the first such refusal.
	var remote map[int32][]int
	var notLed error
	elsewhere := 0
	for i, p := range parts {
		o, err := t.b.ListOffsets(name, p, at)
		var nl *broker.NotLeaderError
		if errors.As(err, &nl) && nl.Leader != 0 && t.fanOut(ctx) {
			if remote == nil {
				remote, notLed = map[int32][]int{}, t.toConnect(err, pmeta(name, p))
			}
			remote[nl.Leader] = append(remote[nl.Leader], i)
			elsewhere++
			out.Partitions = append(out.Partitions, nil)
			continue
		}
		if err != nil {
			return nil, t.toConnect(err, pmeta(name, p))
		}
		r := &sluicev1.PartitionOffsetResult{Partition: p, Offset: o.Offset}
		if o.Offset < 0 { // nothing at or after the time: the high watermark, per the schema
			hw, err := t.b.ListOffsets(name, p, broker.OffsetLatest)
			if err != nil {
				return nil, t.toConnect(err, pmeta(name, p))
			}
			r.Offset = hw.Offset
		}
		if o.Timestamp >= 0 {
			r.Timestamp = timestamppb.New(time.UnixMilli(o.Timestamp))
		}
		out.Partitions = append(out.Partitions, r)
	}
	if len(remote) == 1 && elsewhere == len(parts) {
		return nil, notLed // one other node leads them all: forwarded whole (forward.go)
	}
	if err := t.listOffsetsFrom(ctx, req.Header(), req.Msg, parts, out.Partitions, remote, notLed); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// partitions returns the requested partitions, or all of the topic's.
func (a *API) partitions(topic string, want []int32) ([]int32, error) {
	n, err := a.b.PartitionCount(topic)
	if err != nil {
		return nil, a.toConnect(err, tmeta(topic))
	}
	if len(want) > 0 {
		return want, nil
	}
	all := make([]int32, n)
	for i := range all {
		all[i] = int32(i)
	}
	return all, nil
}

func pmeta(topic string, p int32) map[string]string {
	return map[string]string{"topic": topic, "partition": fmt.Sprint(p)}
}

// records decodes stored batches into the schema's records, skipping those
// below from (a fetch may start mid-batch) and stopping at maxRecords.
func records(data []byte, partition int32, from int64, maxRecords int) ([]*sluicev1.Record, int64, error) {
	var out []*sluicev1.Record
	next := from
	for len(data) > 0 && len(out) < maxRecords {
		size, err := batch.FrameSize(data)
		if err != nil || size > int64(len(data)) {
			break // a partial batch at the end of a read
		}
		for r, err := range batch.Records(data[:size]) {
			if err != nil {
				return nil, next, err
			}
			if r.Offset < from || len(out) >= maxRecords {
				continue
			}
			rec := &sluicev1.Record{Key: clone(r.Key), Value: clone(r.Value), Partition: partition,
				Offset: r.Offset, Timestamp: timestamppb.New(time.UnixMilli(r.Timestamp))}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, &sluicev1.Header{Key: h.Key, Value: clone(h.Value)})
			}
			out, next = append(out, rec), r.Offset+1
		}
		data = data[size:]
	}
	return out, next, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
