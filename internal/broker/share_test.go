package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// shareJoin joins member to group over topic and opens its session.
func (e *env) shareJoin(group, member, topic string) {
	e.t.Helper()
	if res := e.b.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: group, MemberID: member, Topics: []string{topic}}); res.Err != nil {
		e.t.Fatalf("join %s: %v", member, res.Err)
	}
}

// shareFetch runs a ShareFetch and returns the offsets it acquired.
func (e *env) shareFetch(req ShareFetchRequest) (ShareFetchResult, map[int64]int16) {
	e.t.Helper()
	res := e.b.ShareFetch(context.Background(), req)
	got := map[int64]int16{}
	for _, p := range res.Parts {
		for _, a := range p.Acquired {
			for o := a.First; o <= a.Last; o++ {
				got[o] = a.DeliveryCount
			}
		}
	}
	return res, got
}

func one(off int64, typ int8) []ShareAckBatch {
	return []ShareAckBatch{{First: off, Last: off, Types: []int8{typ}}}
}

// TestShareJoinsNativeSubscription: a share group named like a native
// subscription reads that subscription's cursor: a record a native
// consumer holds is not acquired, a record the share member releases goes
// to the native consumer with its count, and each side's acks finish the
// record for both.
func TestShareJoinsNativeSubscription(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("ev", 1)
	e.createSub(SubscriptionSettings{Topic: "ev", Name: "workers", FromEarliest: true})
	p0 := int32(0)
	e.produce("ev", ProduceRecord{Value: []byte("a"), Partition: &p0}, ProduceRecord{Value: []byte("b"), Partition: &p0},
		ProduceRecord{Value: []byte("c"), Partition: &p0})
	native := e.subReceive("ev", "workers", 1)
	if len(native) != 1 || native[0].Offset != 0 {
		t.Fatalf("native receive: %+v", native)
	}
	e.shareJoin("workers", "m", "ev")
	sp := SharePartition{Topic: "ev", Partition: 0}
	base := ShareFetchRequest{Group: "workers", MemberID: "m", Add: []SharePartition{sp}, MaxRecords: 10}
	_, got := e.shareFetch(base)
	if len(got) != 2 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("share fetch acquired %v, want 1 and 2 (0 is the native consumer's)", got)
	}
	req := base
	req.SessionEpoch, req.NoFetch = 1, true
	req.Acks = map[SharePartition][]ShareAckBatch{sp: {{First: 1, Last: 2, Types: []int8{ShareAckAccept, ShareAckRelease}}}}
	if res, _ := e.shareFetch(req); res.Err != nil || res.Parts[0].AckErr != nil {
		t.Fatalf("acks: %v %+v", res.Err, res.Parts)
	}
	e.subAck("ev", "workers", native...)
	again := e.subReceive("ev", "workers", 10)
	if len(again) != 1 || again[0].Offset != 2 || again[0].ReceiveCount != 2 {
		t.Fatalf("native receive after the share release: %+v", again)
	}
}

// TestShareRenew: a renewed lock outlives the lock duration; without the
// renew the record would have gone to the other member.
func TestShareRenew(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("rn", 1)
	if err := e.b.AlterShareGroupConfig("g", map[string]*string{ShareAutoOffsetResetKey: ptr("earliest")}, false); err != nil {
		t.Fatal(err)
	}
	e.produce("rn", ProduceRecord{Value: []byte("a")})
	e.shareJoin("g", "a", "rn")
	e.shareJoin("g", "b", "rn")
	sp := SharePartition{Topic: "rn", Partition: 0}
	if _, got := e.shareFetch(ShareFetchRequest{Group: "g", MemberID: "a", Add: []SharePartition{sp}}); len(got) != 1 {
		t.Fatalf("a acquired %v", got)
	}
	e.clock.Advance(20 * time.Second)
	res, _ := e.shareFetch(ShareFetchRequest{Group: "g", MemberID: "a", SessionEpoch: 1, NoFetch: true,
		Acks: map[SharePartition][]ShareAckBatch{sp: one(0, ShareAckRenew)}})
	if res.Err != nil || res.Parts[0].AckErr != nil {
		t.Fatalf("renew: %v %+v", res.Err, res.Parts)
	}
	e.clock.Advance(20 * time.Second) // 40 s after the acquisition, 20 s after the renew
	e.b.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: 1})
	if _, got := e.shareFetch(ShareFetchRequest{Group: "g", MemberID: "b", Add: []SharePartition{sp}}); len(got) != 0 {
		t.Fatalf("b acquired %v while a's renewed lock holds", got)
	}
	res, _ = e.shareFetch(ShareFetchRequest{Group: "g", MemberID: "a", SessionEpoch: 2, NoFetch: true,
		Acks: map[SharePartition][]ShareAckBatch{sp: one(0, ShareAckAccept)}})
	if res.Err != nil || res.Parts[0].AckErr != nil {
		t.Fatalf("accept after renew: %v %+v", res.Err, res.Parts)
	}
}

func ptr(s string) *string { return &s }

// TestShareConfigDurable: group configs survive a restart; a refused change
// stores nothing.
func TestShareConfigDurable(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.b.AlterShareGroupConfig("g", map[string]*string{ShareLockDurationKey: ptr("5000"), ShareDeliveryLimitKey: ptr("3")}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.b.AlterShareGroupConfig("g", map[string]*string{ShareLockDurationKey: ptr("1000"), ShareDeliveryLimitKey: ptr("11")}, false); err == nil {
		t.Fatal("a delivery limit of 11 accepted")
	}
	if err := e.b.AlterShareGroupConfig("g", map[string]*string{ShareLockDurationKey: ptr("1000")}, true); err != nil {
		t.Fatal(err) // validate only
	}
	// share.isolation.level: read_committed is what is served, and
	// accepted; read_uncommitted (Kafka's default) would not be honoured.
	if err := e.b.AlterShareGroupConfig("g", map[string]*string{ShareIsolationLevelKey: ptr("read_committed")}, true); err != nil {
		t.Fatal(err)
	}
	if err := e.b.AlterShareGroupConfig("g", map[string]*string{ShareLockDurationKey: ptr("1000"), ShareIsolationLevelKey: ptr("read_uncommitted")}, false); err == nil {
		t.Fatal("share.isolation.level=read_uncommitted accepted")
	}
	if v := e.b.ShareGroupConfig("g").Values()[ShareIsolationLevelKey]; v != "read_committed" {
		t.Fatalf("share.isolation.level described as %q", v)
	}
	e.restart()
	c := e.b.ShareGroupConfig("g")
	if c.LockDuration != 5*time.Second || c.DeliveryLimit != 3 || c.AutoOffsetReset != "latest" {
		t.Fatalf("after restart: %+v", c)
	}
}

// TestShareAdminInCluster: on the group coordinator of a cluster a share group's offsets
// are deleted (its subscription, in the catalog) once it is empty, and so is the group;
// an alter makes the state it moves; a dead-letter queue must be a queue of the catalog.
func TestShareAdminInCluster(t *testing.T) {
	c := newMemCluster(t, 1)
	_, b := c.coordinator()
	if _, err := b.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if res := b.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: "g", MemberID: "m", Topics: []string{"t"}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, err := b.GetSubscription("t", "g"); err != nil {
		t.Fatalf("the join's subscription: %v", err)
	}
	if err := b.DeleteShareGroupOffsets("g", "t"); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("delete offsets of a group with a member: %v", err)
	}
	if res := b.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: -1}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := b.DeleteShareGroupOffsets("g", "t"); err != nil {
		t.Fatalf("delete offsets of the empty group: %v", err)
	}
	if _, err := b.GetSubscription("t", "g"); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
	if err := b.DeleteShareGroupOffsets("g", "t"); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("delete offsets again: %v", err)
	}
	if err := b.AlterShareGroupOffset("g", "t", 0, 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("alter offsets past the end of an empty partition: %v", err)
	}
	if err := b.AlterShareGroupOffset("g", "t", 0, 0); err != nil { // initialises the group's state
		t.Fatalf("alter offsets on a cluster node: %v", err)
	}
	if err := b.DeleteShareGroupOffsets("g", "t"); err != nil {
		t.Fatalf("delete the offsets the alter made: %v", err)
	}
	var inv *InvalidArgumentError
	if err := b.AlterShareGroupConfig("d", map[string]*string{ShareDeadLetterKey: ptr("q")}, false); !errors.As(err, &inv) {
		t.Fatalf("a share group dead-letter queue that does not exist: %v", err)
	}
	if _, err := b.CreateQueue(QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if err := b.AlterShareGroupConfig("d", map[string]*string{ShareDeadLetterKey: ptr("q")}, false); err != nil {
		t.Fatalf("a share group dead-letter queue on a cluster node: %v", err)
	}
	if err := b.AlterShareGroupConfig("h", map[string]*string{ShareDeliveryLimitKey: ptr("3")}, false); err != nil {
		t.Fatal(err)
	}
	if got := b.ShareGroupConfig("h").DeliveryLimit; got != 3 {
		t.Fatalf("delivery limit %d after setting 3", got)
	}
	if _, err := b.CreateSubscription(SubscriptionSettings{Topic: "t", Name: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteShareGroup("h"); err != nil {
		t.Fatalf("delete share group h (a subscription of t): %v", err)
	}
	if err := b.DeleteShareGroup("h"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("delete share group h again: %v", err)
	}
	if got := b.ShareGroupConfig("h"); got != DefaultShareConfig() {
		t.Fatalf("h's config after its delete: %+v", got)
	}
}

// TestShareAdminLeavesNoGroupBehind: admin calls naming ids no member
// joined (the offsets admin APIs, DeleteGroups) keep nothing in memory
// for them, whatever they answer; a group with members is refused and
// kept, and a member joins normally after an admin call dropped the lock
// entry it had to make.
func TestShareAdminLeavesNoGroupBehind(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("ev", 1)
	for i := range 50 {
		id := "ghost-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		_ = e.b.AlterShareGroupOffset(id, "no-such-topic", 0, 0)
		_ = e.b.DeleteShareGroupOffsets(id, "no-such-topic")
	}
	if err := e.b.DeleteShareGroup("ghost-aa"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("DeleteGroups of an id no member joined: %v, want ErrGroupNotFound", err)
	}
	sg := e.b.shares()
	sg.mu.Lock()
	left := len(sg.groups)
	sg.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d share groups kept in memory for ids no member joined", left)
	}
	e.shareJoin("workers", "m", "ev")
	if err := e.b.DeleteShareGroupOffsets("workers", "ev"); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("admin call on a group with a member: %v, want ErrGroupNotEmpty", err)
	}
	if sg.group("workers", false) == nil {
		t.Fatal("the group with a member was dropped")
	}
	res := e.b.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: "workers", MemberID: "m", MemberEpoch: 1})
	if res.Err != nil {
		t.Fatalf("heartbeat after the admin call: %v", res.Err)
	}
}
