package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// acquiredOf is the offsets a share fetch acquired, with their delivery counts.
func acquiredOf(res ShareFetchResult) map[SharePartition]map[int64]int16 {
	out := map[SharePartition]map[int64]int16{}
	for _, p := range res.Parts {
		for _, a := range p.Acquired {
			if out[p.SharePartition] == nil {
				out[p.SharePartition] = map[int64]int16{}
			}
			for o := a.First; o <= a.Last; o++ {
				out[p.SharePartition][o] = a.DeliveryCount
			}
		}
	}
	return out
}

// partErr is a share fetch's error for one partition, fetch or acknowledgement.
func partErr(res ShareFetchResult, sp SharePartition, ack bool) error {
	for _, p := range res.Parts {
		if p.SharePartition == sp {
			if ack {
				return p.AckErr
			}
			return p.Err
		}
	}
	return nil
}

// leaderID waits for a live node that leads topic/p, other than not.
func (c *memCluster) leaderID(topic string, p int32, not multiraft.NodeID) multiraft.NodeID {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range c.ids {
			if b := c.nodes[id].b; b != nil && id != not {
				if pl, err := b.PartitionPlacement(topic, p); err == nil && pl.Leader == int32(id) {
					if h := c.mustPart(b, topic, p).repl.Load(); h != nil {
						if l, _ := h.part.Leader(); l == id {
							return id
						}
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("no leader of %s/%d but n%d within 30 s", topic, p, not)
	return 0
}

func (c *memCluster) mustPart(b *Broker, topic string, p int32) *partitionRT {
	_, part, err := b.streams.partition(topic, p)
	if err != nil {
		c.t.Fatal(err)
	}
	return part
}

// setShareConfig sets a share group's configs through node via (the catalog's: a follower
// forwards) and waits until every live node applied them.
func (c *memCluster) setShareConfig(via multiraft.NodeID, group string, kv ...string) {
	c.t.Helper()
	changes := map[string]*string{}
	for i := 0; i < len(kv); i += 2 {
		changes[kv[i]] = &kv[i+1]
	}
	if err := c.nodes[via].b.AlterShareGroupConfig(group, changes, false); err != nil {
		c.t.Fatalf("share group config through n%d: %v", via, err)
	}
	want := c.nodes[via].b.ShareGroupConfig(group)
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range c.ids {
		for c.nodes[id].b != nil && c.nodes[id].b.ShareGroupConfig(group) != want {
			if time.Now().After(deadline) {
				c.t.Fatalf("n%d has %+v, n%d set %+v", id, c.nodes[id].b.ShareGroupConfig(group), via, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestClusterShareGroupFailover: a share group on a three-node cluster. The member joins on
// the coordinator (the others answer NOT_COORDINATOR), fetches from the partition's leader
// (another node answers that partition NOT_LEADER), accepts half of what it acquired, and
// the leader is killed. On the next leader the accepted records are never delivered again;
// the others are not delivered before their lock runs out, the member's acknowledgement of
// one through its new session is refused (the session that acquired it died with its node),
// and once their locks run out they are delivered again with delivery count 2 (the
// replicated cursor's). Accepting them leaves the share-partition's start at the log's
// end, and every replica's cursor agrees. On main a cluster node refused share groups.
func TestClusterShareGroupFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const lock = 3 * time.Second
	c := newMemCluster(t, 3)
	cid, ctl := c.coordinator()
	other := c.ids[0] // a follower of the catalog sets the configs: they are the catalog's
	if other == cid {
		other = c.ids[1]
	}
	c.setShareConfig(other, "g", ShareAutoOffsetResetKey, "earliest", ShareLockDurationKey, fmt.Sprint(lock.Milliseconds()))
	if _, err := ctl.CreateTopic(TopicSettings{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	join := ShareHeartbeatRequest{Group: "g", MemberID: "m", Topics: []string{"t"}}
	for deadline := time.Now().Add(10 * time.Second); ; {
		res := ctl.ShareGroupHeartbeat(context.Background(), join)
		if res.Err == nil && res.HasAssignment && len(res.Assignment) == 1 && len(res.Assignment[0].Partitions) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("join on the coordinator n%d: %+v", cid, res)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range c.ids {
		if id == cid {
			continue
		}
		if res := c.nodes[id].b.ShareGroupHeartbeat(context.Background(), join); !errors.Is(res.Err, ErrNotCoordinator) {
			t.Fatalf("join on n%d (n%d coordinates): %v", id, cid, res.Err)
		}
	}
	if info, err := ctl.DescribeShareGroup("g"); err != nil || len(info.Members) != 1 {
		t.Fatalf("describe on the coordinator: %+v %v", info, err)
	}
	for _, id := range c.ids {
		if id != cid {
			if err := c.nodes[id].b.DeleteShareGroupOffsets("g", "t"); !errors.Is(err, ErrNotCoordinator) {
				t.Fatalf("delete share group offsets on n%d (n%d coordinates): %v", id, cid, err)
			}
		}
	}
	c.produceTo("t", "r", 10) // into t/0

	sp := SharePartition{Topic: "t", Partition: 0}
	l0 := c.leaderID("t", 0, 0)
	for _, id := range c.ids {
		if id != l0 {
			res := c.nodes[id].b.ShareFetch(context.Background(), ShareFetchRequest{Group: "g", MemberID: "m",
				Add: []SharePartition{sp}, MaxRecords: 10})
			if err := partErr(res, sp, false); !errors.Is(err, ErrNotLeader) || res.Err != nil {
				t.Fatalf("share fetch of t/0 on n%d (n%d leads): %v %v", id, l0, res.Err, err)
			}
			break
		}
	}
	lb := c.nodes[l0].b
	fetch := ShareFetchRequest{Group: "g", MemberID: "m", Add: []SharePartition{sp}, MaxRecords: 10, MaxWait: 2 * time.Second}
	got := map[int64]int16{}
	for deadline := time.Now().Add(20 * time.Second); len(got) < 10; {
		res := lb.ShareFetch(context.Background(), fetch)
		if res.Err != nil {
			t.Fatalf("share fetch on the leader n%d: %v", l0, res.Err)
		}
		for o, n := range acquiredOf(res)[sp] {
			got[o] = n
		}
		fetch.SessionEpoch++
		fetch.Add = nil
		if time.Now().After(deadline) {
			t.Fatalf("acquired %v of 10 records in 20 s", got)
		}
	}
	acquiredAt := time.Now()
	for o, n := range got {
		if o < 0 || o > 9 || n != 1 {
			t.Fatalf("acquired t/0@%d with delivery count %d", o, n)
		}
	}
	ack := ShareFetchRequest{Group: "g", MemberID: "m", SessionEpoch: fetch.SessionEpoch, NoFetch: true, Acknowledge: true,
		Acks: map[SharePartition][]ShareAckBatch{sp: {{First: 0, Last: 4, Types: []int8{ShareAckAccept}}}}}
	if res := lb.ShareFetch(context.Background(), ack); res.Err != nil || partErr(res, sp, true) != nil {
		t.Fatalf("accepting 0-4 on n%d: %v %v", l0, res.Err, partErr(res, sp, true))
	}

	c.crash(l0, false)
	l1 := c.leaderID("t", 0, l0)
	nb := c.nodes[l1].b
	next := ShareFetchRequest{Group: "g", MemberID: "m", Add: []SharePartition{sp}, MaxRecords: 10}
	res := nb.ShareFetch(context.Background(), next)
	if res.Err != nil {
		t.Fatalf("opening a session on the new leader n%d: %v", l1, res.Err)
	}
	early := acquiredOf(res)[sp]
	if time.Since(acquiredAt) < lock-500*time.Millisecond && len(early) > 0 {
		t.Fatalf("the new leader delivered %v within the old acquisition's lock", early)
	}
	next.SessionEpoch, next.Add = 1, nil
	if len(early) == 0 {
		stale := ShareFetchRequest{Group: "g", MemberID: "m", SessionEpoch: 1, NoFetch: true, Acknowledge: true,
			Acks: map[SharePartition][]ShareAckBatch{sp: {{First: 5, Last: 5, Types: []int8{ShareAckAccept}}}}}
		if res := nb.ShareFetch(context.Background(), stale); !errors.Is(partErr(res, sp, true), ErrShareRecordState) {
			t.Fatalf("accepting on n%d what the member acquired from n%d: %v %v, want ErrShareRecordState", l1, l0, res.Err, partErr(res, sp, true))
		}
		next.SessionEpoch = 2
	}
	t.Logf("n%d killed, n%d leads t/0 %v after the acquisition; delivered at once: %v", l0, l1, time.Since(acquiredAt).Round(time.Millisecond), early)
	again := early
	next.MaxWait = 2 * time.Second
	for deadline := time.Now().Add(30 * time.Second); len(again) < 5; {
		res := nb.ShareFetch(context.Background(), next)
		if res.Err != nil {
			t.Fatalf("share fetch on n%d: %v", l1, res.Err)
		}
		if again == nil {
			again = map[int64]int16{}
		}
		for o, n := range acquiredOf(res)[sp] {
			again[o] = n
		}
		next.SessionEpoch++
		if time.Now().After(deadline) {
			t.Fatalf("redelivered %v of 5-9 in 30 s", again)
		}
	}
	for o, n := range again {
		if o < 5 || o > 9 {
			t.Fatalf("t/0@%d delivered again after it was accepted", o)
		}
		if n != 2 {
			t.Fatalf("t/0@%d delivered again with delivery count %d, want 2", o, n)
		}
	}
	accept := ShareFetchRequest{Group: "g", MemberID: "m", SessionEpoch: next.SessionEpoch, NoFetch: true, Acknowledge: true,
		Acks: map[SharePartition][]ShareAckBatch{sp: {{First: 5, Last: 9, Types: []int8{ShareAckAccept}}}}}
	if res := nb.ShareFetch(context.Background(), accept); res.Err != nil || partErr(res, sp, true) != nil {
		t.Fatalf("accepting 5-9 on n%d: %v %v", l1, res.Err, partErr(res, sp, true))
	}
	next.SessionEpoch++
	next.MaxWait = lock + time.Second
	if res := nb.ShareFetch(context.Background(), next); len(acquiredOf(res)[sp]) > 0 || res.Err != nil {
		t.Fatalf("after every record was accepted: %v %v", acquiredOf(res), res.Err)
	}
	offs, err := nb.ShareGroupOffsets("g", "t")
	if err != nil || len(offs) != 2 || offs[0].Start != 10 || offs[0].Lag != 0 {
		t.Fatalf("share group offsets on n%d: %+v %v, want t/0 at 10 with no lag", l1, offs, err)
	}
	if ts := nb.ShareGroupTopics("g"); len(ts) != 1 || ts[0] != "t" {
		t.Fatalf("share group topics: %v", ts)
	}
	c.start(l0)
	c.cursorsAgree(t, "t", 2)
}

// fetchUntil share-fetches on b (the request's epoch advanced each time) until want
// offsets of sp were acquired, and returns them with their delivery counts.
func fetchUntil(t *testing.T, b *Broker, req *ShareFetchRequest, sp SharePartition, want int) map[int64]int16 {
	t.Helper()
	got := map[int64]int16{}
	for deadline := time.Now().Add(30 * time.Second); len(got) < want; {
		res := b.ShareFetch(context.Background(), *req)
		if res.Err != nil || partErr(res, sp, false) != nil {
			t.Fatalf("share fetch: %v %v", res.Err, partErr(res, sp, false))
		}
		for o, n := range acquiredOf(res)[sp] {
			got[o] = n
		}
		req.SessionEpoch++
		req.Add = nil
		if time.Now().After(deadline) {
			t.Fatalf("acquired %v of %d records in 30 s", got, want)
		}
	}
	return got
}

// TestClusterShareLeaderMoves: the partition's leadership is handed to another node (no
// crash) between a member's acquisition and its acknowledgement. The old leader answers
// the acknowledgement and the next fetch NOT_LEADER for the partition and settles nothing
// (the records it refused come back after their lock, delivery count 2); what was
// accepted before the move never comes back.
func TestClusterShareLeaderMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const lock = 2 * time.Second
	was := balanceEvery
	balanceEvery = time.Hour // the moved leadership stays moved
	t.Cleanup(func() { balanceEvery = was })
	c := newMemCluster(t, 3)
	c.setShareConfig(c.ids[2], "g", ShareAutoOffsetResetKey, "earliest", ShareLockDurationKey, fmt.Sprint(lock.Milliseconds()))
	_, ctl := c.coordinator()
	if _, err := ctl.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	join := ShareHeartbeatRequest{Group: "g", MemberID: "m", Topics: []string{"t"}}
	if res := ctl.ShareGroupHeartbeat(context.Background(), join); res.Err != nil {
		t.Fatal(res.Err)
	}
	c.produceTo("t", "r", 6)
	sp := SharePartition{Topic: "t", Partition: 0}
	l0 := c.leaderID("t", 0, 0)
	ob := c.nodes[l0].b
	req := ShareFetchRequest{Group: "g", MemberID: "m", Add: []SharePartition{sp}, MaxRecords: 6, MaxWait: time.Second}
	if got := fetchUntil(t, ob, &req, sp, 6); len(got) != 6 {
		t.Fatalf("acquired %v", got)
	}
	accept := func(b *Broker, epoch int32, first, last int64) ShareFetchResult {
		return b.ShareFetch(context.Background(), ShareFetchRequest{Group: "g", MemberID: "m", SessionEpoch: epoch, NoFetch: true,
			Acknowledge: true, Acks: map[SharePartition][]ShareAckBatch{sp: {{First: first, Last: last, Types: []int8{ShareAckAccept}}}}})
	}
	if res := accept(ob, req.SessionEpoch, 0, 1); res.Err != nil || partErr(res, sp, true) != nil {
		t.Fatalf("accepting 0-1 on the leader: %v %v", res.Err, partErr(res, sp, true))
	}
	req.SessionEpoch++
	to := c.ids[0]
	if to == l0 {
		to = c.ids[1]
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if err := ob.TransferLeader("t", 0, int32(to)); err != nil && !errors.Is(err, ErrNotLeader) {
			t.Logf("transfer: %v", err)
		}
		if h := c.mustPart(ob, "t", 0).repl.Load(); h != nil {
			if l, _ := h.part.Leader(); l != l0 && l != 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the leadership never moved")
		}
		time.Sleep(50 * time.Millisecond)
	}
	res := accept(ob, req.SessionEpoch, 2, 3)
	if err := partErr(res, sp, true); res.Err != nil || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("accepting 2-3 on the old leader: %v %v, want NOT_LEADER", res.Err, err)
	}
	req.SessionEpoch++
	req.MaxWait = 0
	if res := ob.ShareFetch(context.Background(), req); !errors.Is(partErr(res, sp, false), ErrNotLeader) {
		t.Fatalf("fetch on the old leader: %v %v, want NOT_LEADER", res.Err, partErr(res, sp, false))
	}
	nl := c.leaderID("t", 0, l0)
	next := ShareFetchRequest{Group: "g", MemberID: "m", Add: []SharePartition{sp}, MaxRecords: 6, MaxWait: time.Second}
	again := fetchUntil(t, c.nodes[nl].b, &next, sp, 4)
	for o, n := range again {
		if o < 2 || n != 2 {
			t.Fatalf("after the move t/0@%d delivered with count %d (0-1 accepted, 2-5 held at count 1)", o, n)
		}
	}
	if res := accept(c.nodes[nl].b, next.SessionEpoch, 2, 5); res.Err != nil || partErr(res, sp, true) != nil {
		t.Fatalf("accepting 2-5 on n%d: %v %v", nl, res.Err, partErr(res, sp, true))
	}
}

// TestClusterShareAckTypes: on a three-node cluster's partition leader, each
// acknowledgement type is the replicated cursor's operation: a release comes back at once
// with its count one higher, and at share.delivery.count.limit is archived; a reject never
// comes back; a renew outlives the lock duration; a record left alone comes back after it.
// The brokers run on an injected clock, which the replicated cursors' entries carry: every
// lock runs out exactly when the test moves the clock past it.
func TestClusterShareAckTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const lock = time.Second
	was := balanceEvery
	balanceEvery = time.Hour // the leader found below stays the leader (a hand-back failed this test once)
	t.Cleanup(func() { balanceEvery = was })
	clock := newClock()
	c := newMemClusterClock(t, 3, 0, clock.Now)
	c.setShareConfig(c.ids[0], "g", ShareAutoOffsetResetKey, "earliest", ShareLockDurationKey, fmt.Sprint(lock.Milliseconds()),
		ShareDeliveryLimitKey, "2")
	member := c.shareMemberHolding4(t)
	ack, fetch := member.ack, member.fetch
	clock.Advance(lock / 2) // so the renewed lock runs out half a lock after the others
	ack(0, ShareAckRelease, ShareAckReject, ShareAckRenew)
	if got := fetch(0); len(got) != 1 || got[0] != 2 {
		t.Fatalf("after release, reject, renew: %v, want only 0 again at count 2 (the others' locks hold)", got)
	}
	ack(0, ShareAckRelease)                  // at the delivery count limit: archived
	clock.Advance(lock/2 + time.Millisecond) // offset 3's lock has run out, offset 2's renewed one not
	if got := fetchSeen(t, fetch, 1); len(got) != 1 || got[3] != 2 {
		t.Fatalf("after offset 3's lock ran out: %v, want only 3 at count 2", got)
	}
	if got := fetch(300 * time.Millisecond); len(got) > 0 {
		t.Fatalf("within offset 2's renewed lock: %v delivered", got)
	}
	clock.Advance(lock / 2) // and now offset 2's renewed lock
	if got := fetchSeen(t, fetch, 1); len(got) != 1 || got[2] != 2 {
		t.Fatalf("after offset 2's renewed lock ran out: %v, want only 2 at count 2", got)
	}
	ack(2, ShareAckAccept, ShareAckAccept)
	clock.Advance(2 * lock)
	if got := fetch(300 * time.Millisecond); len(got) > 0 {
		t.Fatalf("after every record was finished: %v (0 archived at the limit, 1 rejected)", got)
	}
}

// shareMemberHolding4 makes topic t (one partition) with four records, has member m join
// share group g (configured already) on the coordinator, and returns it holding all four,
// acquired from the partition's leader.
func (c *memCluster) shareMemberHolding4(t *testing.T) *testShareMember {
	t.Helper()
	_, ctl := c.coordinator()
	if _, err := ctl.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if res := ctl.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: "g", MemberID: "m", Topics: []string{"t"}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	c.produceTo("t", "r", 4)
	sp := SharePartition{Topic: "t", Partition: 0}
	lb := c.nodes[c.leaderID("t", 0, 0)].b
	member := &testShareMember{t: t, b: lb, sp: sp,
		req: ShareFetchRequest{Group: "g", MemberID: "m", Add: []SharePartition{sp}, MaxRecords: 4, MaxWait: time.Second}}
	if got := fetchUntil(t, lb, &member.req, sp, 4); len(got) != 4 {
		t.Fatalf("acquired %v", got)
	}
	return member
}

// testShareMember drives one member's share session on a partition's leader: its
// acknowledgements without a fetch, and fetches that acknowledge nothing; req carries the
// session's epoch from one call to the next.
type testShareMember struct {
	t   *testing.T
	b   *Broker
	sp  SharePartition
	req ShareFetchRequest
}

func (m *testShareMember) ack(first int64, types ...int8) {
	m.t.Helper()
	res := m.b.ShareFetch(context.Background(), ShareFetchRequest{Group: m.req.Group, MemberID: m.req.MemberID, SessionEpoch: m.req.SessionEpoch,
		NoFetch: true, Acks: map[SharePartition][]ShareAckBatch{m.sp: {{First: first, Last: first + int64(len(types)) - 1, Types: types}}}})
	m.req.SessionEpoch++
	if res.Err != nil || partErr(res, m.sp, true) != nil {
		m.t.Fatalf("acks %v from %d: %v %v", types, first, res.Err, partErr(res, m.sp, true))
	}
}

func (m *testShareMember) fetch(wait time.Duration) map[int64]int16 {
	m.t.Helper()
	m.req.MaxWait = wait
	res := m.b.ShareFetch(context.Background(), m.req)
	m.req.SessionEpoch++
	if res.Err != nil || partErr(res, m.sp, false) != nil {
		m.t.Fatalf("share fetch: %v %v", res.Err, partErr(res, m.sp, false))
	}
	return acquiredOf(res)[m.sp]
}

// fetchSeen calls fetch until it has seen want records or 10 s passed (a leader long-polls
// its cursors every 100 ms, so what the clock made ready shows within a poll).
func fetchSeen(t *testing.T, fetch func(time.Duration) map[int64]int16, want int) map[int64]int16 {
	t.Helper()
	seen := map[int64]int16{}
	for deadline := time.Now().Add(10 * time.Second); len(seen) < want && time.Now().Before(deadline); {
		maps.Copy(seen, fetch(300*time.Millisecond))
	}
	return seen
}
