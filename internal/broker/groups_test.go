package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/journal"
	"github.com/sluice-mq/sluice/internal/vfs"
)

const testSession = 10 * time.Second

// joinAsync starts a blocking join and returns where its answer arrives.
func (e *env) joinAsync(g, member string, topics ...string) <-chan ConsumerAssignment {
	ch := make(chan ConsumerAssignment, 1)
	go func() {
		a, err := e.b.JoinConsumer(context.Background(), ConsumerJoin{Group: g, MemberID: member, ClientID: "c", Topics: topics, SessionTimeout: testSession})
		if err != nil {
			e.t.Errorf("join %s: %v", member, err)
		}
		ch <- a
	}()
	return ch
}

func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal("no answer")
		panic("unreachable")
	}
}

// eventually waits, without sleeping, for another goroutine to make cond true.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for range 1_000_000 {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("condition never held")
}

func owned(as ...ConsumerAssignment) []int32 {
	var out []int32
	for _, a := range as {
		for _, tp := range a.Partitions {
			out = append(out, tp.Partitions...)
		}
	}
	slices.Sort(out)
	return out
}

func TestGroupJoinRebalanceExpiryFencing(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("orders", 4)
	a1 := await(t, e.joinAsync("g", "", "orders"))
	if a1.Generation != 1 || !slices.Equal(owned(a1), []int32{0, 1, 2, 3}) {
		t.Fatalf("first member: %+v", a1)
	}
	// A second member joins: the first learns of the rebalance by heartbeat and rejoins.
	wait2 := e.joinAsync("g", "", "orders")
	hb := group.HeartbeatRequest{Group: "g", MemberID: a1.MemberID, Generation: 1}
	// The join goroutine may not have reached the coordinator yet.
	eventually(t, func() bool { return errors.Is(e.b.Heartbeat(hb), group.ErrRebalanceInProgress) })
	a1 = await(t, e.joinAsync("g", a1.MemberID, "orders"))
	a2 := await(t, wait2)
	if a1.Generation != 2 || a2.Generation != 2 || len(owned(a1)) != 2 || !slices.Equal(owned(a1, a2), []int32{0, 1, 2, 3}) {
		t.Fatalf("after rebalance: %+v %+v", a1, a2)
	}
	// A commit from the old generation is fenced; the current one is accepted.
	commit := func(a ConsumerAssignment, gen int32, p int32, off int64) error {
		errs, err := e.b.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", MemberID: a.MemberID, Generation: gen,
			Offsets: []group.OffsetCommit{{Topic: "orders", Partition: p, Offset: off}}})
		return errors.Join(err, errors.Join(errs...))
	}
	if err := commit(a1, 1, a1.Partitions[0].Partitions[0], 5); !errors.Is(err, group.ErrIllegalGeneration) {
		t.Fatalf("stale commit: %v", err)
	}
	if err := commit(a1, 2, a2.Partitions[0].Partitions[0], 5); !errors.Is(err, group.ErrNotAssigned) {
		t.Fatalf("commit of another member's partition: %v", err)
	}
	if err := commit(a1, 2, a1.Partitions[0].Partitions[0], 7); err != nil {
		t.Fatal(err)
	}
	// Member 2 stops heartbeating: after its session it is expired and
	// member 1 gets everything in a new generation.
	e.clock.Advance(testSession / 2)
	hb.Generation = 2
	if err := e.b.Heartbeat(hb); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(testSession/2 + time.Second)
	e.b.Maintain()
	if err := e.b.Heartbeat(hb); !errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("heartbeat after expiry: %v", err)
	}
	a1 = await(t, e.joinAsync("g", a1.MemberID, "orders"))
	if a1.Generation != 3 || !slices.Equal(owned(a1), []int32{0, 1, 2, 3}) {
		t.Fatalf("after expiry: %+v", a1)
	}
	if err := commit(a2, 2, a2.Partitions[0].Partitions[0], 9); !errors.Is(err, group.ErrUnknownMember) {
		t.Fatalf("expired member's commit: %v", err)
	}
	// Adding partitions rebalances the group.
	if _, err := e.b.AddPartitions("orders", 6); err != nil {
		t.Fatal(err)
	}
	hb.Generation = 3
	if err := e.b.Heartbeat(hb); !errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("heartbeat after partitions added: %v", err)
	}
	a1 = await(t, e.joinAsync("g", a1.MemberID, "orders"))
	if len(owned(a1)) != 6 {
		t.Fatalf("after add partitions: %+v", a1)
	}
	info, _ := e.b.DescribeGroup("g")
	if info.State != group.Stable || len(info.Members) != 1 {
		t.Fatalf("describe: %+v", info)
	}
}

func TestGroupCommitsSurviveRestartAndCrash(t *testing.T) {
	e := newEnv(t, nil) // SnapshotEvery 50: the loop below crosses snapshots
	e.createTopic("t", 2)
	for i := range 120 {
		errs, err := e.b.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", Generation: -1,
			Offsets: []group.OffsetCommit{{Topic: "t", Partition: int32(i % 2), Offset: int64(i), Metadata: fmt.Sprint(i)}}})
		if err != nil || errs[0] != nil {
			t.Fatalf("commit %d: %v %v", i, err, errs)
		}
		if i%40 == 0 {
			e.b.Maintain()
		}
	}
	check := func(when string) {
		t.Helper()
		for p, want := range []int64{118, 119} {
			got, ok := e.b.FetchOffset("g", "t", int32(p))
			if !ok || got.Offset != want {
				t.Fatalf("%s: partition %d committed %+v, want %d", when, p, got, want)
			}
		}
	}
	check("before restart")
	e.restart()
	check("after restart")
	e.crash()
	check("after crash")
	errs, err := e.b.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", Generation: -1,
		Offsets: []group.OffsetCommit{{Topic: "nope", Partition: 0, Offset: 1}, {Topic: "t", Partition: 9, Offset: 1}}})
	if err != nil || !errors.Is(errs[0], ErrTopicNotFound) || !errors.Is(errs[1], ErrUnknownPartition) {
		t.Fatalf("commit to unknown partitions: %v %v", errs, err)
	}
	if err := e.b.DeleteGroup("g"); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if _, ok := e.b.FetchOffset("g", "t", 0); ok {
		t.Fatal("deleted group's offsets came back")
	}
}

func TestGroupLeaderAssignsRelay(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 2)
	join := func(member, meta string) <-chan group.JoinResult {
		ch := make(chan group.JoinResult, 1)
		go func() {
			r, err := e.b.JoinGroup(context.Background(), group.JoinRequest{Group: "k", MemberID: member, ClientID: "kc",
				RequireKnownMemberID: true, ProtocolType: "consumer", Protocols: []group.Protocol{{Name: "range", Metadata: []byte(meta)}},
				Topics: []string{"t"}, SessionTimeout: testSession, RebalanceTimeout: testSession})
			if err != nil && !errors.Is(err, group.ErrMemberIDRequired) {
				t.Errorf("join: %v", err)
			}
			ch <- r
		}()
		return ch
	}
	sync := func(req group.SyncRequest) <-chan group.SyncResult {
		ch := make(chan group.SyncResult, 1)
		go func() {
			res, err := e.b.SyncGroup(context.Background(), req)
			if err != nil {
				t.Errorf("sync: %v", err)
			}
			ch <- res
		}()
		return ch
	}
	// JoinGroup v4+: the first join is answered with an id to join with.
	first := await(t, join("", "m1"))
	if !errors.Is(first.Err, group.ErrMemberIDRequired) || first.MemberID == "" {
		t.Fatalf("v4 first join should ask for a member id: %+v", first)
	}
	leader := await(t, join(first.MemberID, "m1"))
	if leader.Generation != 1 || leader.Leader != leader.MemberID {
		t.Fatalf("leader join: %+v", leader)
	}
	if res := await(t, sync(group.SyncRequest{Group: "k", MemberID: leader.MemberID, Generation: 1,
		Assignments: map[string][]byte{leader.MemberID: []byte("all")}})); string(res.Assignment) != "all" {
		t.Fatalf("sync: %+v", res)
	}
	// A second member: the leader rejoins when its heartbeat says so, gets
	// everyone's metadata, and its assignment is relayed to the follower,
	// whose sync waits for it.
	second := await(t, join("", "m2"))
	wait2 := join(second.MemberID, "m2")
	hb := group.HeartbeatRequest{Group: "k", MemberID: leader.MemberID, Generation: 1}
	eventually(t, func() bool { return errors.Is(e.b.Heartbeat(hb), group.ErrRebalanceInProgress) })
	leader = await(t, join(leader.MemberID, "m1"))
	follower := await(t, wait2)
	if leader.Generation != 2 || len(leader.Members) != 2 || follower.Leader != leader.MemberID || len(follower.Members) != 0 {
		t.Fatalf("second generation: leader %+v follower %+v", leader, follower)
	}
	fsync := sync(group.SyncRequest{Group: "k", MemberID: follower.MemberID, Generation: 2})
	lres := await(t, sync(group.SyncRequest{Group: "k", MemberID: leader.MemberID, Generation: 2,
		Assignments: map[string][]byte{leader.MemberID: []byte("p0"), follower.MemberID: []byte("p1")}}))
	if fres := await(t, fsync); string(fres.Assignment) != "p1" || string(lres.Assignment) != "p0" {
		t.Fatalf("relayed assignments: leader %q follower %q", lres.Assignment, fres.Assignment)
	}
	for _, m := range []string{leader.MemberID, follower.MemberID} {
		if errs, err := e.b.LeaveGroup("k", []group.MemberRef{{MemberID: m}}); err != nil || errs[0] != nil {
			t.Fatalf("leave: %v %v", errs, err)
		}
	}
	if info, _ := e.b.DescribeGroup("k"); info.State != group.Empty {
		t.Fatalf("after leave: %+v", info)
	}
}

func TestGroupResetOffsets(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("r", 1)
	start := e.clock.Now()
	for i := range 5 {
		e.produce("r", kv("", fmt.Sprint(i)))
		e.clock.Advance(time.Minute)
	}
	for _, c := range []struct {
		spec ResetSpec
		want int64
	}{
		{ResetSpec{To: ResetLatest}, 5}, {ResetSpec{To: ResetEarliest}, 0},
		{ResetSpec{To: ResetToOffset, Offset: 99}, 5}, {ResetSpec{To: ResetToOffset, Offset: 2}, 2},
		{ResetSpec{To: ResetToTime, Time: start.Add(3 * time.Minute)}, 3},
	} {
		if _, err := e.b.ResetGroupOffsets("g", "r", nil, c.spec); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.b.FetchOffset("g", "r", 0); got.Offset != c.want {
			t.Fatalf("reset %+v: %d, want %d", c.spec, got.Offset, c.want)
		}
	}
	a := await(t, e.joinAsync("g", "", "r"))
	if _, err := e.b.ResetGroupOffsets("g", "r", nil, ResetSpec{To: ResetEarliest}); !errors.Is(err, group.ErrGroupNotEmpty) {
		t.Fatalf("reset of an active group: %v", err)
	}
	if len(e.b.ListGroups()) != 1 || a.MemberID == "" {
		t.Fatal("list groups")
	}
}

// A group's protocol type and assignment mode survive a restart, from the
// journal and from a snapshot alike: an Empty group still describes itself
// as a native (broker-assigned) group, not as one of unknown protocol.
func TestGroupProtocolSurvivesRestart(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) {
			e := newEnv(t, nil)
			e.createTopic("t", 1)
			a := await(t, e.joinAsync("g", "", "t"))
			if _, err := e.b.LeaveGroup("g", []group.MemberRef{{MemberID: a.MemberID}}); err != nil {
				t.Fatal(err)
			}
			if snapshot {
				g, _ := e.b.groups()
				g.mu.Lock()
				g.jr.MaybeSnapshot(0, 0, g.captureLocked)
				g.mu.Unlock()
			}
			e.restart()
			info, ok := e.b.DescribeGroup("g")
			if !ok || info.State != group.Empty || info.ProtocolType != "sluice" {
				t.Fatalf("after restart: %+v %v, want an Empty group of protocol type sluice", info, ok)
			}
			sums := e.b.ListGroups()
			if len(sums) != 1 || sums[0].Mode != group.BrokerAssigns {
				t.Fatalf("list after restart: %+v, want g broker-assigned", sums)
			}
		})
	}
}

// Offset commits of several groups run concurrently while the group journal's snapshots
// (every 50 events) are encoded beside them, off the groups' lock: every commit
// acknowledged survives a restart and a crash, and under -race the encoding reads only
// what the capture froze.
func TestGroupCommitsDuringSnapshotEncoding(t *testing.T) {
	e := newEnv(t, nil) // SnapshotEvery 50
	e.createTopic("t", 4)
	const groups, commits = 4, 150
	var wg sync.WaitGroup
	for w := range groups {
		wg.Go(func() {
			for i := range commits {
				req := group.CommitRequest{Group: fmt.Sprintf("g%d", w), Generation: -1}
				for p := range 4 {
					req.Offsets = append(req.Offsets, group.OffsetCommit{Topic: "t", Partition: int32(p), Offset: int64(i*10 + p)})
				}
				if errs, err := e.b.CommitOffsets(context.Background(), req); err != nil || errs[0] != nil {
					t.Errorf("g%d commit %d: %v %v", w, i, err, errs)
					return
				}
				if w == 0 && i%25 == 0 {
					e.b.Maintain()
				}
			}
		})
	}
	wg.Wait()
	check := func(when string) {
		t.Helper()
		for w := range groups {
			for p := range 4 {
				want := int64((commits-1)*10 + p)
				if got, ok := e.b.FetchOffset(fmt.Sprintf("g%d", w), "t", int32(p)); !ok || got.Offset != want {
					t.Fatalf("%s: g%d partition %d committed %+v, want %d", when, w, p, got, want)
				}
			}
		}
	}
	check("before restart")
	g, _ := e.b.groups()
	e.restart() // Close waits for a snapshot being encoded, and writes it
	data, err := vfs.ReadFile(e.fs, filepath.Join(g.dir, journal.SnapshotFile))
	if err != nil {
		t.Fatalf("no group journal snapshot was written: %v", err)
	}
	if at, _, err := journal.UnframeSnapshot(data); err != nil || at == 0 {
		t.Fatalf("the newest group journal snapshot is at %d (%v)", at, err)
	}
	check("after restart")
	e.crash()
	check("after crash")
}
