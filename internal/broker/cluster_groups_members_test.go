package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
)

// retryCoordinator runs call on the coordinator until it answers something other than
// NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE (a new controller getting ready).
func retryCoordinator[T any](c *memCluster, call func(*Broker) (T, error)) (T, error) {
	c.t.Helper()
	for attempt := 0; ; attempt++ {
		_, b := c.coordinator()
		v, err := call(b)
		if (errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrCoordinatorNotAvailable)) && attempt < 200 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		return v, err
	}
}

// TestClusterGroupMembersSurviveControllerPowerCuts: a classic group of two members,
// Stable, on a three-node cluster whose controller (every group's coordinator) loses
// power, round after round. The next coordinator knows the members: their heartbeats
// and commits of the same generation are accepted, a repeated sync answers the same
// assignment, and nobody rejoins. Then a member leaves, the coordinator loses power
// again, and the next one has the rebalance the departure started: the other member
// hears REBALANCE_IN_PROGRESS, and its rejoin alone forms the next generation. Before
// membership was recorded, every heartbeat after a power cut was UNKNOWN_MEMBER_ID.
func TestClusterGroupMembersSurviveControllerPowerCuts(t *testing.T) {
	c, _, _ := newGroupCluster(t)
	ctx := context.Background()
	join := func(id string) group.JoinResult {
		t.Helper()
		r, err := retryCoordinator(c, func(b *Broker) (group.JoinResult, error) {
			return b.JoinGroup(ctx, group.JoinRequest{Group: "g", MemberID: id, ClientID: "c", ProtocolType: "consumer",
				Protocols: []group.Protocol{{Name: "range", Metadata: []byte("m-" + id)}}, Topics: []string{"t"},
				SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second})
		})
		if err != nil {
			t.Fatalf("join %q: %v", id, err)
		}
		return r
	}
	sync := func(id string, gen int32, assign map[string][]byte) []byte {
		t.Helper()
		r, err := retryCoordinator(c, func(b *Broker) (group.SyncResult, error) {
			return b.SyncGroup(ctx, group.SyncRequest{Group: "g", MemberID: id, Generation: gen, Assignments: assign})
		})
		if err != nil {
			t.Fatalf("sync %s gen %d: %v", id, gen, err)
		}
		return r.Assignment
	}
	heartbeat := func(id string, gen int32) error {
		_, err := retryCoordinator(c, func(b *Broker) (struct{}, error) {
			return struct{}{}, b.Heartbeat(group.HeartbeatRequest{Group: "g", MemberID: id, Generation: gen})
		})
		return err
	}

	// A alone, then B joining: A hears the rebalance on its heartbeat and rejoins.
	a := join("")
	if got := sync(a.MemberID, a.Generation, map[string][]byte{a.MemberID: []byte("a:0,1")}); string(got) != "a:0,1" {
		t.Fatalf("A's first assignment %q", got)
	}
	bDone := make(chan group.JoinResult, 1)
	go func() { bDone <- join("") }()
	for heartbeat(a.MemberID, a.Generation) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	a = join(a.MemberID)
	bj := <-bDone
	if a.Generation != bj.Generation || a.Leader != a.MemberID {
		t.Fatalf("A %+v, B %+v: want one generation led by A", a, bj)
	}
	gen, ids := a.Generation, []string{a.MemberID, bj.MemberID}
	assign := map[string][]byte{ids[0]: []byte("a:0"), ids[1]: []byte("b:1")}
	bSync := make(chan []byte, 1)
	go func() { bSync <- sync(ids[1], gen, nil) }()
	if got := sync(ids[0], gen, assign); string(got) != "a:0" {
		t.Fatalf("A's assignment %q", got)
	}
	if got := <-bSync; string(got) != "b:1" {
		t.Fatalf("B's assignment %q", got)
	}

	for round := range envInt("SLUICE_CLUSTER_CUTS", 3) {
		id, _ := c.coordinator()
		c.crash(id, true)
		next, nb := c.coordinator()
		info, _ := nb.DescribeGroup("g")
		if info.State != group.Stable || info.Generation != gen || len(info.Members) != 2 {
			t.Fatalf("round %d: n%d lost power; n%d describes %s generation %d with %d members, want Stable %d with 2",
				round, id, next, info.State, info.Generation, len(info.Members), gen)
		}
		for _, m := range ids {
			if err := heartbeat(m, gen); err != nil {
				t.Fatalf("round %d: heartbeat of %s on the new coordinator n%d: %v", round, m, next, err)
			}
		}
		if got := sync(ids[1], gen, nil); string(got) != "b:1" {
			t.Fatalf("round %d: B's repeated sync %q", round, got)
		}
		errs, err := retryCoordinator(c, func(b *Broker) ([]error, error) {
			return b.CommitOffsets(ctx, group.CommitRequest{Group: "g", MemberID: ids[0], Generation: gen,
				Offsets: []group.OffsetCommit{{Topic: "t", Partition: 0, Offset: int64(10 + round), LeaderEpoch: -1}}})
		})
		if err != nil || errs[0] != nil {
			t.Fatalf("round %d: A's commit of generation %d: %v %v", round, gen, err, errs)
		}
		c.start(id)
		t.Logf("round %d: coordinator n%d lost power; n%d kept generation %d and both members", round, id, next, gen)
	}

	// A leaves; the rebalance it starts survives the next power cut.
	if _, err := retryCoordinator(c, func(b *Broker) ([]error, error) {
		return b.LeaveGroup("g", []group.MemberRef{{MemberID: ids[0]}})
	}); err != nil {
		t.Fatal(err)
	}
	id, _ := c.coordinator()
	c.crash(id, true)
	if err := heartbeat(ids[1], gen); !errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("B's heartbeat after A left and n%d lost power: %v, want REBALANCE_IN_PROGRESS", id, err)
	}
	if err := heartbeat(ids[0], gen); !errors.Is(err, group.ErrUnknownMember) {
		t.Fatalf("A's heartbeat after it left: %v, want UNKNOWN_MEMBER_ID", err)
	}
	b2 := join(ids[1])
	if b2.Generation != gen+1 || b2.Leader != ids[1] || len(b2.Members) != 1 {
		t.Fatalf("B's rejoin: %+v, want generation %d led by B alone", b2, gen+1)
	}
}
