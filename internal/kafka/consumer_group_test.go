package kafka

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

func newTestClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Unix(1_700_000_000, 0).UnixNano())
	return c
}

// startConsumerNode is startNode with a fake clock and KIP-848 settings.
// A nil clock is the real one.
func startConsumerNode(t *testing.T, clock *fakeClock, cg broker.ConsumerGroupConfig) *node {
	t.Helper()
	dir := t.TempDir()
	o := broker.Options{Dir: dir, Logger: quietLogger(), Sync: broker.SyncPolicy{Mode: broker.SyncNever}, ConsumerGroups: cg}
	if clock != nil {
		o.Now = clock.now
	}
	b, err := broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, dir: dir, b: b, s: New(b, withLogger(Config{})), addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { n.done <- n.s.Serve(ln) }()
	t.Cleanup(n.stop)
	return n
}

// cgMember is a consumer driven by hand over ConsumerGroupHeartbeat v1.
type cgMember struct {
	r     *rawConn
	id    string
	inst  *string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func (m *cgMember) heartbeat(t *testing.T, mod func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = 1, "kg", m.id, m.epoch, m.inst
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 30000, []string{"kt"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if mod != nil {
		mod(req)
	}
	resp := m.r.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.owned = nil
			for _, at := range resp.Assignment.Topics {
				m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: at.TopicID, Partitions: at.Partitions})
			}
		}
	}
	return resp
}

// ack reports what the member owns (it finished revoking).
func ack(m *cgMember) func(*kmsg.ConsumerGroupHeartbeatRequest) {
	return func(r *kmsg.ConsumerGroupHeartbeatRequest) {
		r.Topics = append([]kmsg.ConsumerGroupHeartbeatRequestTopic{}, m.owned...)
	}
}

func ownedCount(m *cgMember) int {
	n := 0
	for _, t := range m.owned {
		n += len(t.Partitions)
	}
	return n
}

func mustCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	wantCode := int16(0)
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestConsumerGroupProtocol drives two members through join, assignment,
// revoke-before-assign, commits with member epochs, describe and list,
// fencing, session expiry on the injected clock.
func TestConsumerGroupProtocol(t *testing.T) {
	clock := newTestClock()
	n := startConsumerNode(t, clock, broker.ConsumerGroupConfig{SessionTimeout: 10 * time.Second, HeartbeatInterval: 700 * time.Millisecond})
	n.createTopic("kt", 6)
	a := &cgMember{r: n.raw(), id: "member-a"}
	b := &cgMember{r: n.raw(), id: "member-b"}

	resp := a.heartbeat(t, nil)
	mustCode(t, "a joins", resp.ErrorCode, nil)
	if resp.MemberEpoch != 1 || ownedCount(a) != 6 || resp.HeartbeatIntervalMillis != 700 || *resp.MemberID != "member-a" {
		t.Fatalf("a joined: %+v, owns %d", resp, ownedCount(a))
	}
	s, _ := n.b.DescribeTopic("kt")
	if a.owned[0].TopicID != topicID(s.Settings) {
		t.Fatalf("assignment names topic id %x, want %x", a.owned[0].TopicID, topicID(s.Settings))
	}
	resp = b.heartbeat(t, nil)
	if resp.MemberEpoch != 2 || ownedCount(b) != 0 {
		t.Fatalf("b joined: epoch %d, owns %d: it must wait for a to revoke", resp.MemberEpoch, ownedCount(b))
	}
	// a learns it must give up three; it keeps its epoch meanwhile.
	if resp = a.heartbeat(t, nil); resp.Assignment == nil || ownedCount(a) != 3 || a.epoch != 1 {
		t.Fatalf("a revoking: %+v owns %d", resp, ownedCount(a))
	}
	if b.heartbeat(t, nil); ownedCount(b) != 0 {
		t.Fatal("b got partitions a has not released")
	}
	// A commit at a's current epoch (v9) is fine; v8 cannot carry the epoch.
	commit := func(v int16, member string, epoch int32, p int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = v, "kg", member, epoch
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "kt", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: p, Offset: 7, LeaderEpoch: -1}}}}
		return a.r.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	p := a.owned[0].Partitions[0]
	mustCode(t, "commit at a's epoch", commit(9, "member-a", 1, p), nil)
	mustCode(t, "commit ahead of a's epoch", commit(9, "member-a", 5, p), kerr.StaleMemberEpoch)
	mustCode(t, "commit by v8", commit(8, "member-a", 1, p), kerr.UnsupportedVersion)
	mustCode(t, "commit by a stranger", commit(9, "nobody", 1, p), kerr.UnknownMemberID)

	a.heartbeat(t, ack(a)) // released
	if a.epoch != 2 {
		t.Fatalf("a after releasing: epoch %d", a.epoch)
	}
	if b.heartbeat(t, ack(b)); ownedCount(b) != 3 || b.epoch != 2 {
		t.Fatalf("b after a released: owns %d at %d", ownedCount(b), b.epoch)
	}
	// a's commit at epoch 1 of a partition it held since epoch 1 still counts.
	mustCode(t, "commit at a's previous epoch", commit(9, "member-a", 1, p), nil)

	fetch := func(member string, epoch int32) *kmsg.OffsetFetchResponseGroup {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "kg", MemberID: &member, MemberEpoch: epoch,
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "kt", Partitions: []int32{p}}}}}
		return &a.r.do(req).(*kmsg.OffsetFetchResponse).Groups[0]
	}
	mustCode(t, "fetch at a stale epoch", fetch("member-a", 1).ErrorCode, kerr.StaleMemberEpoch)
	if g := fetch("member-a", 2); g.ErrorCode != 0 || g.Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("fetch at a's epoch: %+v", g)
	}

	checkDescribe(t, a.r)
	checkListAndClassic(t, a.r)

	resp = a.heartbeat(t, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 9 })
	mustCode(t, "epoch from the future", resp.ErrorCode, kerr.FencedMemberEpoch)
	if resp.ErrorMessage == nil {
		t.Error("FENCED_MEMBER_EPOCH without a message")
	}

	// b stops heartbeating; a keeps on. Past b's session b is gone and a
	// takes everything.
	clock.advance(6 * time.Second)
	a.heartbeat(t, nil)
	clock.advance(5 * time.Second)
	n.b.Maintain()
	mustCode(t, "b after its session", b.heartbeat(t, nil).ErrorCode, kerr.UnknownMemberID)
	a.heartbeat(t, nil)
	if a.heartbeat(t, ack(a)); ownedCount(a) != 6 {
		t.Fatalf("a after b expired owns %d", ownedCount(a))
	}
	// Leaving: epoch -1 answers -1, and the group is empty again.
	mustCode(t, "leave", a.heartbeat(t, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 }).ErrorCode, nil)
	if a.epoch != -1 {
		t.Fatalf("leave answered epoch %d", a.epoch)
	}
}

func checkDescribe(t *testing.T, r *rawConn) {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version, req.Groups = 1, []string{"kg", "nope", ""}
	resp := r.do(req).(*kmsg.ConsumerGroupDescribeResponse)
	g := resp.Groups[0]
	if g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != 2 || g.AssignmentEpoch != 2 || g.AssignorName != "uniform" || len(g.Members) != 2 {
		t.Fatalf("describe: %+v", g)
	}
	for _, m := range g.Members {
		if m.MemberEpoch != 2 || len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "kt" ||
			len(m.Assignment.TopicPartitions[0].Partitions) != 3 || !slices.Equal(m.SubscribedTopics, []string{"kt"}) || m.MemberType != 1 {
			t.Fatalf("member: %+v", m)
		}
		if !slices.Equal(m.Assignment.TopicPartitions[0].Partitions, m.TargetAssignment.TopicPartitions[0].Partitions) {
			t.Fatalf("a stable member's assignment is not its target: %+v", m)
		}
	}
	mustCode(t, "describe unknown", resp.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	mustCode(t, "describe empty id", resp.Groups[2].ErrorCode, kerr.InvalidGroupID)
}

// checkListAndClassic: ListGroups shows the type; the classic APIs treat
// the group as Kafka does.
func checkListAndClassic(t *testing.T, r *rawConn) {
	t.Helper()
	list := func(types ...string) []kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.TypesFilter = 5, types
		return r.do(req).(*kmsg.ListGroupsResponse).Groups
	}
	if gs := list(); len(gs) != 1 || gs[0].GroupType != "consumer" || gs[0].GroupState != "Stable" || gs[0].ProtocolType != "consumer" {
		t.Fatalf("list: %+v", gs)
	}
	if gs := list("classic"); len(gs) != 0 {
		t.Fatalf("list classic: %+v", gs)
	}
	if gs := list("Consumer"); len(gs) != 1 {
		t.Fatalf("list consumer: %+v", gs)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 6, []string{"kg"}
	mustCode(t, "DescribeGroups of a consumer group", r.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode, kerr.GroupIDNotFound)
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = 5, "kg", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	mustCode(t, "classic join to a consumer group", r.do(jg).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"kg"}
	mustCode(t, "delete a consumer group with members", r.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, kerr.NonEmptyGroup)
}

func TestConsumerGroupStaticMemberRejoins(t *testing.T) {
	clock := newTestClock()
	n := startConsumerNode(t, clock, broker.ConsumerGroupConfig{})
	n.createTopic("kt", 4)
	inst := "pod-0"
	a := &cgMember{r: n.raw(), id: "a-1", inst: &inst}
	b := &cgMember{r: n.raw(), id: "b"}
	a.heartbeat(t, nil)
	b.heartbeat(t, nil)
	a.heartbeat(t, nil)
	a.heartbeat(t, ack(a))
	b.heartbeat(t, ack(b))
	if ownedCount(a) != 2 || ownedCount(b) != 2 {
		t.Fatalf("owned %d and %d", ownedCount(a), ownedCount(b))
	}
	// A second process with the same instance id while a is alive.
	a2 := &cgMember{r: n.raw(), id: "a-2", inst: &inst}
	mustCode(t, "instance id in use", a2.heartbeat(t, nil).ErrorCode, kerr.UnreleasedInstanceID)
	// a restarts: leaves with -2, comes back as a-2, gets the same partitions
	// at the same epoch; b saw nothing move.
	mustCode(t, "static leave", a.heartbeat(t, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }).ErrorCode, nil)
	if a.epoch != -2 {
		t.Fatalf("static leave answered epoch %d", a.epoch)
	}
	resp := a2.heartbeat(t, nil)
	mustCode(t, "static rejoin", resp.ErrorCode, nil)
	if resp.MemberEpoch != 2 || ownedCount(a2) != 2 || !slices.Equal(a2.owned[0].Partitions, a.owned[0].Partitions) {
		t.Fatalf("rejoined at %d with %v, a had %v", resp.MemberEpoch, a2.owned, a.owned)
	}
	if resp := b.heartbeat(t, nil); resp.MemberEpoch != 2 || resp.Assignment != nil {
		t.Fatalf("b after the static rejoin: %+v", resp)
	}
	mustCode(t, "the old id", a.heartbeat(t, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 2 }).ErrorCode, kerr.UnknownMemberID)
}

// TestConsumerGroupHeartbeatBadInput: every error Kafka answers for bad
// arguments, and a refused heartbeat changes nothing.
func TestConsumerGroupHeartbeatBadInput(t *testing.T) {
	clock := newTestClock()
	n := startConsumerNode(t, clock, broker.ConsumerGroupConfig{})
	n.createTopic("kt", 2)
	r := n.raw()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		v    int16
		mod  func(*kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"empty group", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.Group = "" }, kerr.InvalidRequest},
		{"v1 without member id", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.MemberID = "" }, kerr.InvalidRequest},
		{"empty instance id", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.InstanceID = str("") }, kerr.InvalidRequest},
		{"empty rack id", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.RackID = str("") }, kerr.InvalidRequest},
		{"epoch -3", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"static leave without instance id", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.MemberEpoch = -2 }, kerr.InvalidRequest},
		{"join without rebalance timeout", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest},
		{"join without subscription", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.SubscribedTopicNames = nil }, kerr.InvalidRequest},
		{"join owning partitions", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) {
			q.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: [16]byte{1}, Partitions: []int32{0}}}
		}, kerr.InvalidRequest},
		{"bad regex", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.SubscribedTopicRegex = str("k(") }, kerr.InvalidRegularExpression},
		{"unknown assignor", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.ServerAssignor = str("sticky") }, kerr.UnsupportedAssignor},
		{"heartbeat of an unknown member", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.MemberEpoch = 3 }, kerr.UnknownMemberID},
		{"leave of an unknown member", 1, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.MemberEpoch = -1 }, kerr.UnknownMemberID},
		{"v0 heartbeat without member id", 0, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.MemberID, q.MemberEpoch = "", 1 }, kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = tc.v, "kg", "m", 30000
			req.SubscribedTopicNames, req.Topics = []string{"kt"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			tc.mod(req)
			resp := r.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
			mustCode(t, tc.name, resp.ErrorCode, tc.want)
			if resp.ErrorMessage == nil || resp.Assignment != nil {
				t.Fatalf("error answer: %+v", resp)
			}
			if gs := n.b.ListGroups(); len(gs) != 0 {
				t.Fatalf("a refused heartbeat created %+v", gs)
			}
		})
	}
	// v0 lets the coordinator name a joining member.
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 0, "kg", 30000, []string{"kt"}
	resp := r.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 || resp.MemberID == nil || *resp.MemberID == "" || resp.MemberEpoch != 1 {
		t.Fatalf("v0 join: %+v", resp)
	}
}

// TestConsumerGroupTopicGrows: a topic gaining partitions (CreatePartitions)
// moves the group epoch, and the member's next heartbeat brings the new
// partitions; a regex subscription picks up a topic created later.
func TestConsumerGroupTopicGrows(t *testing.T) {
	n := startConsumerNode(t, newTestClock(), broker.ConsumerGroupConfig{})
	n.createTopic("kt", 2)
	a := &cgMember{r: n.raw(), id: "a"}
	a.heartbeat(t, func(r *kmsg.ConsumerGroupHeartbeatRequest) {
		re := "kt|new.*"
		r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, &re
	})
	if ownedCount(a) != 2 || a.epoch != 1 {
		t.Fatalf("joined with %d partitions at epoch %d", ownedCount(a), a.epoch)
	}
	ctx := testCtx(t, 10*time.Second)
	if _, err := n.admin().CreatePartitions(ctx, 3, "kt"); err != nil {
		t.Fatal(err)
	}
	n.createTopic("new-one", 2)
	n.createTopic("other", 2)
	resp := a.heartbeat(t, ack(a))
	if resp.Assignment == nil || ownedCount(a) != 7 || a.epoch <= 1 {
		t.Fatalf("after kt grew to 5 and new-one appeared: %+v, owns %d", resp, ownedCount(a))
	}
}

// A KIP-848 group keeps its type across a restart, as Kafka's group
// records do: listed as a consumer group (Empty) before any member is
// back, described by ConsumerGroupDescribe, not by DescribeGroups.
func TestConsumerGroupTypeAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	n.createTopic("kt", 2)
	a := &cgMember{r: n.raw(), id: "member-a"}
	mustCode(t, "a joins", a.heartbeat(t, nil).ErrorCode, nil)
	mustCode(t, "a leaves", a.heartbeat(t, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 }).ErrorCode, nil)
	n.stop()

	n = startNode(t, dir)
	r := n.raw()
	if got := listGroups(t, r, []string{"consumer"}, nil); len(got) != 1 || got[0] != "kg consumer Empty consumer" {
		t.Fatalf("consumer groups after a restart: %v", got)
	}
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Version, cgd.Groups = apis[69].max, []string{"kg"}
	if g := r.do(cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; g.ErrorCode != 0 || g.State != "Empty" {
		t.Fatalf("ConsumerGroupDescribe after a restart: %v %s", kerr.ErrorForCode(g.ErrorCode), g.State)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = apis[15].max, []string{"kg"}
	if g := r.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups of a consumer group after a restart: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	b := &cgMember{r: r, id: "member-b"}
	if resp := b.heartbeat(t, nil); resp.ErrorCode != 0 || ownedCount(b) != 2 {
		t.Fatalf("a member joining after the restart: %v, owns %d", kerr.ErrorForCode(resp.ErrorCode), ownedCount(b))
	}
}
