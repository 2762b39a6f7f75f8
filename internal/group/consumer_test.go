package group

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// cclient is a KIP-848 consumer as the coordinator sees it: what it owns,
// its epoch, and whether it acknowledges revocations at once.
type cclient struct {
	id    string
	inst  *string
	epoch int32
	owned tpSet
}

type cfix struct {
	t   *testing.T
	c   *Coordinator
	now time.Time
}

func newCfix(t *testing.T, cfg Config) *cfix {
	f := &cfix{t: t, c: New(cfg), now: epoch}
	f.c.SetPartitions(f.now, "t", 6)
	return f
}

func joinReq(id string, topics ...string) ConsumerHeartbeatRequest {
	return ConsumerHeartbeatRequest{Group: "g", MemberID: id, MemberEpoch: 0, RebalanceTimeout: 30 * time.Second,
		Topics: topics, Owned: []TopicPartitions{}, MemberIDRequired: true, ClientID: "c"}
}

// join adds a member subscribed to topics and returns its client.
func (f *cfix) join(id string, topics ...string) *cclient {
	f.t.Helper()
	res, _ := f.c.ConsumerHeartbeat(f.now, joinReq(id, topics...))
	if res.Err != nil {
		f.t.Fatalf("join %s: %v", id, res.Err)
	}
	cl := &cclient{id: res.MemberID, owned: tpSet{}}
	cl.apply(res)
	return cl
}

func (cl *cclient) apply(res ConsumerHeartbeatResult) {
	cl.epoch = res.MemberEpoch
	if res.HasAssignment {
		cl.owned = fromList(res.Assignment)
	}
}

// beat heartbeats with what the client owns; ack=false reports nothing
// (Owned null), as a client still revoking does.
func (f *cfix) beat(cl *cclient, ack bool) ConsumerHeartbeatResult {
	f.t.Helper()
	req := ConsumerHeartbeatRequest{Group: "g", MemberID: cl.id, MemberEpoch: cl.epoch, RebalanceTimeout: -1, InstanceID: cl.inst}
	if ack {
		req.Owned = toList(cl.owned)
	}
	res, _ := f.c.ConsumerHeartbeat(f.now, req)
	if res.Err == nil {
		cl.apply(res)
	}
	return res
}

// settle heartbeats every client, acknowledging, until nothing changes.
func (f *cfix) settle(cls ...*cclient) {
	f.t.Helper()
	for range 10 {
		changed := false
		for _, cl := range cls {
			before := len(cl.owned)
			e := cl.epoch
			if res := f.beat(cl, true); res.Err != nil {
				f.t.Fatalf("beat %s: %v", cl.id, res.Err)
			}
			changed = changed || e != cl.epoch || before != len(cl.owned)
		}
		if !changed {
			return
		}
	}
	f.t.Fatal("group never settled")
}

func count(cls ...*cclient) (total int, disjoint bool) {
	seen := tpSet{}
	for _, cl := range cls {
		for tp := range cl.owned {
			if seen[tp] {
				return 0, false
			}
			seen[tp] = true
		}
	}
	return len(seen), true
}

func TestConsumerJoinAssignsEveryPartitionOnce(t *testing.T) {
	for _, assignor := range []string{AssignorUniform, AssignorRange} {
		t.Run(assignor, func(t *testing.T) {
			f := newCfix(t, Config{Consumer: ConsumerConfig{Assignors: []string{assignor}}})
			a, b, c := f.join("a", "t"), f.join("b", "t"), f.join("c", "t")
			f.settle(a, b, c)
			n, ok := count(a, b, c)
			if !ok || n != 6 {
				t.Fatalf("owned %v %v %v: %d partitions, disjoint %v", a.owned, b.owned, c.owned, n, ok)
			}
			for _, cl := range []*cclient{a, b, c} {
				if len(cl.owned) != 2 || cl.epoch != 3 {
					t.Errorf("%s: %d partitions at epoch %d, want 2 at 3", cl.id, len(cl.owned), cl.epoch)
				}
			}
			info, _ := f.c.Describe("g")
			if info.Type != TypeConsumer || info.State != Stable || info.Epoch != 3 || info.AssignmentEpoch != 3 || info.Assignor != assignor {
				t.Errorf("describe: %+v", info)
			}
		})
	}
}

// TestConsumerRevokesBeforeAssigning: a partition moves to its new owner
// only after the old one reported it released.
func TestConsumerRevokesBeforeAssigning(t *testing.T) {
	f := newCfix(t, Config{})
	a := f.join("a", "t")
	if len(a.owned) != 6 || a.epoch != 1 {
		t.Fatalf("a alone: %v at %d", a.owned, a.epoch)
	}
	b := f.join("b", "t")
	if len(b.owned) != 0 || b.epoch != 2 {
		t.Fatalf("b must wait for a's partitions: %v at %d", b.owned, b.epoch)
	}
	// a hears of the new target: three partitions are taken from it, its
	// epoch stays until it reports them released.
	res := f.beat(a, false)
	if !res.HasAssignment || len(a.owned) != 3 || a.epoch != 1 {
		t.Fatalf("a revoking: %+v owned %v", res, a.owned)
	}
	revoked := fromList([]TopicPartitions{{Topic: "t", Partitions: []int32{0, 1, 2, 3, 4, 5}}})
	for tp := range a.owned {
		delete(revoked, tp)
	}
	// Until a reports them released (no owned list: it is still revoking),
	// b gets nothing.
	f.beat(a, false)
	if f.beat(b, true); len(b.owned) != 0 {
		t.Fatalf("b got %v while a still revokes", b.owned)
	}
	if info, _ := f.c.Describe("g"); info.State != Reconciling {
		t.Fatalf("state %v, want Reconciling", info.State)
	}
	f.beat(a, true) // released
	if a.epoch != 2 {
		t.Fatalf("a after releasing: epoch %d", a.epoch)
	}
	f.beat(b, true)
	if !sameKeys(b.owned, revoked) {
		t.Fatalf("b owns %v, want what a released %v", b.owned, revoked)
	}
	if info, _ := f.c.Describe("g"); info.State != Stable {
		t.Fatalf("state %v, want Stable", info.State)
	}
}

func TestConsumerFencing(t *testing.T) {
	f := newCfix(t, Config{})
	a := f.join("a", "t")
	b := f.join("b", "t")
	c := f.join("c", "t")
	f.settle(a, b, c)
	prev := f.c.groups["g"].cg.members["a"].prevEpoch
	other := int32(1) // behind, and not the previous epoch
	if prev == 1 {
		other = 2
	}
	if a.epoch != 3 || prev == other || prev >= a.epoch {
		t.Fatalf("a at epoch %d, previous %d", a.epoch, prev)
	}
	for _, tc := range []struct {
		name  string
		req   ConsumerHeartbeatRequest
		want  error
		epoch int32
	}{
		{"epoch ahead", ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: a.epoch + 1}, ErrFencedMemberEpoch, 0},
		{"epoch behind", ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: other}, ErrFencedMemberEpoch, 0},
		{"previous epoch, owning more", ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: prev, Owned: []TopicPartitions{{Topic: "t", Partitions: []int32{0, 1, 2, 3, 4, 5}}}}, ErrFencedMemberEpoch, 0},
		{"previous epoch, owned unknown", ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: prev}, ErrFencedMemberEpoch, 0},
		{"previous epoch, lost answer", ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: prev, Owned: toList(a.owned)}, nil, 3},
		{"unknown member", ConsumerHeartbeatRequest{MemberID: "zz", MemberEpoch: 1}, ErrUnknownMember, 0},
		{"unknown group", ConsumerHeartbeatRequest{Group: "other", MemberID: "a", MemberEpoch: 1}, ErrUnknownMember, 0},
		{"instance id of another", ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 3, InstanceID: ptr("i")}, ErrFencedInstanceID, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.Group == "" {
				tc.req.Group = "g"
			}
			tc.req.RebalanceTimeout = -1
			res, _ := f.c.ConsumerHeartbeat(f.now, tc.req)
			if !errors.Is(res.Err, tc.want) || (tc.want == nil && res.MemberEpoch != tc.epoch) {
				t.Fatalf("got %+v, want %v (epoch %d)", res, tc.want, tc.epoch)
			}
		})
	}
	// A fenced member rejoins with epoch 0 under its id and gets its
	// partitions back.
	res, _ := f.c.ConsumerHeartbeat(f.now, joinReq("a", "t"))
	if res.Err != nil || res.MemberEpoch != 3 || !res.HasAssignment || !sameKeys(fromList(res.Assignment), a.owned) {
		t.Fatalf("rejoin: %+v", res)
	}
}

func ptr[T any](v T) *T { return &v }

func TestConsumerSessionExpiry(t *testing.T) {
	f := newCfix(t, Config{Consumer: ConsumerConfig{SessionTimeout: 10 * time.Second}})
	a, b := f.join("a", "t"), f.join("b", "t")
	f.settle(a, b)
	if d, ok := f.c.NextDeadline(); !ok || !d.Equal(f.now.Add(10*time.Second)) {
		t.Fatalf("next deadline %v %v", d, ok)
	}
	f.now = f.now.Add(6 * time.Second)
	f.beat(a, true)
	f.now = f.now.Add(5 * time.Second) // b's session is over, a's is not
	out := f.c.Tick(f.now)
	if len(out.Removed) != 1 || out.Removed[0].MemberID != "b" || out.Removed[0].Reason != RemovedSessionExpired {
		t.Fatalf("removed %+v", out.Removed)
	}
	if res := f.beat(b, true); !errors.Is(res.Err, ErrUnknownMember) {
		t.Fatalf("expired member's heartbeat: %v", res.Err)
	}
	f.settle(a)
	if len(a.owned) != 6 {
		t.Fatalf("a after b expired: %v", a.owned)
	}
}

func TestConsumerRevocationTimeout(t *testing.T) {
	f := newCfix(t, Config{Consumer: ConsumerConfig{SessionTimeout: time.Minute}})
	req := joinReq("a", "t")
	req.RebalanceTimeout = 5 * time.Second
	res, _ := f.c.ConsumerHeartbeat(f.now, req)
	a := &cclient{id: "a"}
	a.apply(res)
	b := f.join("b", "t")
	f.beat(a, false) // told to revoke, never does
	f.now = f.now.Add(5 * time.Second)
	f.beat(a, false) // alive, still holding
	out := f.c.Tick(f.now)
	if len(out.Removed) != 1 || out.Removed[0].Reason != RemovedNotRevoked {
		t.Fatalf("removed %+v", out.Removed)
	}
	f.settle(b)
	if len(b.owned) != 6 {
		t.Fatalf("b: %v", b.owned)
	}
}

func TestConsumerStaticMemberRejoins(t *testing.T) {
	f := newCfix(t, Config{})
	join := func(id string) ConsumerHeartbeatResult {
		req := joinReq(id, "t")
		req.InstanceID = ptr("pod-1")
		res, _ := f.c.ConsumerHeartbeat(f.now, req)
		return res
	}
	r := join("a1")
	a := &cclient{id: "a1", inst: ptr("pod-1")}
	a.apply(r)
	b := f.join("b", "t")
	f.settle(a, b)
	if res := join("a2"); !errors.Is(res.Err, ErrUnreleasedInstanceID) {
		t.Fatalf("second holder of a live instance: %v", res.Err)
	}
	before, _ := f.c.Describe("g")
	res, _ := f.c.ConsumerHeartbeat(f.now, ConsumerHeartbeatRequest{Group: "g", MemberID: "a1", MemberEpoch: StaticLeaveEpoch, InstanceID: ptr("pod-1"), RebalanceTimeout: -1})
	if res.Err != nil || res.MemberEpoch != StaticLeaveEpoch {
		t.Fatalf("static leave: %+v", res)
	}
	if f.beat(b, true); len(b.owned) != 3 {
		t.Fatalf("b took a's partitions while a is away: %v", b.owned)
	}
	res = join("a2")
	after, _ := f.c.Describe("g")
	if res.Err != nil || res.MemberID != "a2" || !sameKeys(fromList(res.Assignment), a.owned) || after.Epoch != before.Epoch {
		t.Fatalf("rejoin: %+v (epoch %d -> %d), want a1's %v", res, before.Epoch, after.Epoch, a.owned)
	}
	if res := f.beat(a, true); !errors.Is(res.Err, ErrUnknownMember) {
		t.Fatalf("the replaced member id: %v", res.Err)
	}
	// Away again; a heartbeat at its old epoch is fenced, a join under the
	// same member id brings it back at that epoch.
	a2 := &cclient{id: "a2", inst: ptr("pod-1"), epoch: res.MemberEpoch}
	f.c.ConsumerHeartbeat(f.now, ConsumerHeartbeatRequest{Group: "g", MemberID: "a2", MemberEpoch: StaticLeaveEpoch, InstanceID: ptr("pod-1"), RebalanceTimeout: -1})
	if r := f.beat(a2, true); !errors.Is(r.Err, ErrFencedMemberEpoch) {
		t.Fatalf("heartbeat of a member away: %+v", r)
	}
	if r := join("a2"); r.Err != nil || r.MemberEpoch != res.MemberEpoch || len(r.Assignment) == 0 {
		t.Fatalf("back under its own id: %+v", r)
	}
}

func TestConsumerHeartbeatBadInput(t *testing.T) {
	f := newCfix(t, Config{})
	f.join("a", "t")
	for _, tc := range []struct {
		name string
		mod  func(*ConsumerHeartbeatRequest)
		want error
	}{
		{"empty group", func(r *ConsumerHeartbeatRequest) { r.Group = "" }, ErrInvalidRequest},
		{"empty instance id", func(r *ConsumerHeartbeatRequest) { r.InstanceID = ptr("") }, ErrInvalidRequest},
		{"empty rack id", func(r *ConsumerHeartbeatRequest) { r.RackID = ptr("") }, ErrInvalidRequest},
		{"epoch -3", func(r *ConsumerHeartbeatRequest) { r.MemberEpoch = -3 }, ErrInvalidRequest},
		{"v1 join without member id", func(r *ConsumerHeartbeatRequest) { r.MemberID = "" }, ErrInvalidRequest},
		{"heartbeat without member id", func(r *ConsumerHeartbeatRequest) { r.MemberID, r.MemberEpoch, r.MemberIDRequired = "", 3, false }, ErrInvalidRequest},
		{"static leave without instance", func(r *ConsumerHeartbeatRequest) { r.MemberEpoch = StaticLeaveEpoch }, ErrInvalidRequest},
		{"join without rebalance timeout", func(r *ConsumerHeartbeatRequest) { r.RebalanceTimeout = -1 }, ErrInvalidRequest},
		{"join owning partitions", func(r *ConsumerHeartbeatRequest) { r.Owned = []TopicPartitions{{Topic: "t", Partitions: []int32{1}}} }, ErrInvalidRequest},
		{"join without subscription", func(r *ConsumerHeartbeatRequest) { r.Topics = nil }, ErrInvalidRequest},
		{"bad regex", func(r *ConsumerHeartbeatRequest) { r.Regex = ptr("t(") }, ErrInvalidRegex},
		{"unknown assignor", func(r *ConsumerHeartbeatRequest) { r.Assignor = ptr("sticky") }, ErrUnsupportedAssignor},
		{"negative owned partition", func(r *ConsumerHeartbeatRequest) {
			r.MemberEpoch, r.Owned = 1, []TopicPartitions{{Topic: "t", Partitions: []int32{-1}}}
		}, ErrInvalidRequest},
		{"member id too long", func(r *ConsumerHeartbeatRequest) { r.MemberID = string(make([]byte, 256)) }, ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := joinReq("n", "t")
			tc.mod(&req)
			before, _ := f.c.Describe("g")
			res, _ := f.c.ConsumerHeartbeat(f.now, req)
			if !errors.Is(res.Err, tc.want) {
				t.Fatalf("got %v, want %v", res.Err, tc.want)
			}
			if after, _ := f.c.Describe("g"); after.Epoch != before.Epoch || len(after.Members) != len(before.Members) {
				t.Fatalf("a refused heartbeat changed the group: %+v -> %+v", before, after)
			}
		})
	}
}

func TestConsumerCommitFence(t *testing.T) {
	f := newCfix(t, Config{})
	a := f.join("a", "t")
	b := f.join("b", "t")
	f.beat(a, false) // a revokes three, stays at epoch 1
	f.beat(a, true)  // released: epoch 2
	f.beat(b, true)  // b gets them at epoch 2
	var aOne, bOne int32 = -1, -1
	for tp := range a.owned {
		aOne = tp.partition
	}
	for tp := range b.owned {
		bOne = tp.partition
	}
	commit := func(member string, epoch int32, p int32, classic bool) (error, error) {
		errs, _, err := f.c.Commit(f.now, CommitRequest{Group: "g", MemberID: member, Generation: epoch, Classic: classic,
			Offsets: []OffsetCommit{{Topic: "t", Partition: p, Offset: 5, LeaderEpoch: -1}}})
		if err != nil {
			return err, nil
		}
		return nil, errs[0]
	}
	for _, tc := range []struct {
		name          string
		member        string
		epoch, p      int32
		classic       bool
		whole, single error
	}{
		{"current epoch", "a", 2, aOne, false, nil, nil},
		{"older epoch, held since then", "a", 1, aOne, false, nil, nil},
		{"older epoch, got it later", "b", 1, bOne, false, ErrStaleMemberEpoch, nil},
		{"epoch ahead", "a", 3, aOne, false, ErrStaleMemberEpoch, nil},
		{"unknown member", "zz", 2, aOne, false, ErrUnknownMember, nil},
		{"outside commit, group has members", "", -1, aOne, false, ErrUnknownMember, nil},
		{"OffsetCommit before v9", "a", 2, aOne, true, ErrUnsupportedVersion, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, single := commit(tc.member, tc.epoch, tc.p, tc.classic)
			if tc.name == "older epoch, got it later" {
				// b joined at epoch 2: epoch 1 is not even one of its.
				if !errors.Is(whole, ErrStaleMemberEpoch) && !errors.Is(single, ErrStaleMemberEpoch) {
					t.Fatalf("got %v / %v", whole, single)
				}
				return
			}
			if !errors.Is(whole, tc.whole) || !errors.Is(single, tc.single) {
				t.Fatalf("got %v / %v, want %v / %v", whole, single, tc.whole, tc.single)
			}
		})
	}
	if err := f.c.CheckFetch("g", "a", 1); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Errorf("fetch at an old epoch: %v", err)
	}
	if err := f.c.CheckFetch("g", "zz", 1); !errors.Is(err, ErrUnknownMember) {
		t.Errorf("fetch by a stranger: %v", err)
	}
	if err := f.c.CheckFetch("g", "", -1); err != nil {
		t.Errorf("admin fetch: %v", err)
	}
	// Once everyone left, a tool may commit (epoch -1).
	for _, cl := range []*cclient{a, b} {
		f.c.ConsumerHeartbeat(f.now, ConsumerHeartbeatRequest{Group: "g", MemberID: cl.id, MemberEpoch: LeaveEpoch})
	}
	if whole, single := commit("", -1, 0, true); whole != nil || single != nil {
		t.Fatalf("outside commit to an empty consumer group: %v %v", whole, single)
	}
}

func TestConsumerAndClassicExclude(t *testing.T) {
	f := newCfix(t, Config{})
	a := f.join("a", "t")
	tk, out := f.c.Join(f.now, JoinRequest{Group: "g", ClientID: "c", ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range"}}, SessionTimeout: 10 * time.Second})
	if r, _ := findJoin(out, tk); !errors.Is(r.Err, ErrInconsistentProtocol) {
		t.Fatalf("classic join to a consumer group: %+v", r)
	}
	if _, err := f.c.Delete("g"); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := f.c.ResetOffsets(f.now, "g", []OffsetCommit{{Topic: "t", Offset: 1}}); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("reset: %v", err)
	}
	if errs, _, _ := f.c.DeleteOffsets(f.now, "g", []TopicPartitions{{Topic: "t", Partitions: []int32{0}}}); !errors.Is(errs[0][0], ErrGroupSubscribedToTopic) {
		t.Fatalf("offset delete: %v", errs)
	}
	if l := f.c.List(); len(l) != 1 || l[0].Type != TypeConsumer || l[0].State != Stable || l[0].Members != 1 {
		t.Fatalf("list: %+v", l)
	}
	// Empty again: a classic member may take the group over, and then a
	// consumer heartbeat is GROUP_ID_NOT_FOUND.
	f.c.ConsumerHeartbeat(f.now, ConsumerHeartbeatRequest{Group: "g", MemberID: a.id, MemberEpoch: LeaveEpoch})
	tk, out = f.c.Join(f.now, JoinRequest{Group: "g", ClientID: "c", ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range"}}, SessionTimeout: 10 * time.Second})
	if r, _ := findJoin(out, tk); r.Err != nil {
		t.Fatalf("classic join to an empty consumer group: %+v", r)
	}
	if res, _ := f.c.ConsumerHeartbeat(f.now, joinReq("x", "t")); !errors.Is(res.Err, ErrGroupNotFound) {
		t.Fatalf("consumer join to a classic group: %v", res.Err)
	}
	if l := f.c.List(); l[0].Type != TypeClassic {
		t.Fatalf("list: %+v", l)
	}
}

func TestConsumerRebalancesWhenTopicsGrowAndRegex(t *testing.T) {
	f := newCfix(t, Config{})
	req := joinReq("a")
	req.Topics, req.Regex = nil, ptr("t|u.*")
	res, _ := f.c.ConsumerHeartbeat(f.now, req)
	a := &cclient{id: "a"}
	a.apply(res)
	if len(a.owned) != 6 {
		t.Fatalf("regex subscription: %v", a.owned)
	}
	f.c.SetPartitions(f.now, "t", 8)
	f.c.SetPartitions(f.now, "u1", 2)
	f.c.SetPartitions(f.now, "x", 2) // not matched
	f.settle(a)
	if len(a.owned) != 10 {
		t.Fatalf("after t grew and u1 appeared: %v", toList(a.owned))
	}
}

func TestUniformIsStickyAndBalanced(t *testing.T) {
	counts := map[string]int32{"t": 7, "u": 5}
	subs := []assignee{{id: "a", topics: []string{"t", "u"}}, {id: "b", topics: []string{"t", "u"}}}
	first := assignUniform(subs, counts)
	subs = append(subs, assignee{id: "c", topics: []string{"t", "u"}})
	subs[0].prev, subs[1].prev = first["a"], first["b"]
	second := assignUniform(subs, counts)
	moved, sizes := 0, []int{}
	for _, id := range []string{"a", "b", "c"} {
		sizes = append(sizes, len(second[id]))
		for tp := range second[id] {
			if id != "c" && !first[id][tp] {
				moved++
			}
		}
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{4, 4, 4}) || moved != 0 {
		t.Fatalf("sizes %v, %d partitions moved between old members", sizes, moved)
	}
}

func TestConsumerGroupMaxSize(t *testing.T) {
	f := newCfix(t, Config{MaxGroupSize: 2})
	f.join("a", "t")
	f.join("b", "t")
	if res, _ := f.c.ConsumerHeartbeat(f.now, joinReq("c", "t")); !errors.Is(res.Err, ErrGroupMaxSize) {
		t.Fatalf("third member: %v", res.Err)
	}
	if res, _ := f.c.ConsumerHeartbeat(f.now, joinReq("a", "t")); res.Err != nil {
		t.Fatalf("a member rejoining a full group: %v", res.Err)
	}
}

// A group's type is durable: the events of a consumer group, replayed as
// at a restart (through their encoding), make an Empty consumer group, not
// a classic one; once a classic member took the group over, they make a
// classic group. Snapshot keeps the type as the journal does.
func TestConsumerGroupTypeSurvivesReplay(t *testing.T) {
	f := newCfix(t, Config{})
	var journal []Event
	record := func(out Output) { journal = append(journal, out.Events...) }
	res, out := f.c.ConsumerHeartbeat(f.now, joinReq("a", "t"))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	record(out)
	_, out = f.c.ConsumerHeartbeat(f.now, ConsumerHeartbeatRequest{Group: "g", MemberID: res.MemberID, MemberEpoch: LeaveEpoch})
	record(out)
	replay := func(evs []Event) []GroupSummary { return replayed(t, evs).List() }
	for name, evs := range map[string][]Event{"journal": journal, "snapshot": f.c.Snapshot()} {
		if l := replay(evs); len(l) != 1 || l[0].Type != TypeConsumer || l[0].State != Empty {
			t.Fatalf("consumer group after replaying its %s: %+v", name, l)
		}
	}

	tk, out := f.c.Join(f.now, JoinRequest{Group: "g", ClientID: "c", ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range"}}, SessionTimeout: 10 * time.Second})
	if r, _ := findJoin(out, tk); r.Err != nil {
		t.Fatalf("classic join to an empty consumer group: %+v", r)
	}
	record(out)
	for name, evs := range map[string][]Event{"journal": journal, "snapshot": f.c.Snapshot()} {
		if l := replay(evs); len(l) != 1 || l[0].Type != TypeClassic {
			t.Fatalf("group taken over by a classic member, after replaying its %s: %+v", name, l)
		}
	}
}
