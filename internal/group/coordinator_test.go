package group

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fixture is a small helper for tests that read better as Go than as a
// script: it joins members and remembers their ids and generation.
type fixture struct {
	t   *testing.T
	c   *Coordinator
	now time.Time
}

func newFixture(t *testing.T, cfg Config) *fixture {
	return &fixture{t: t, c: New(cfg), now: epoch}
}

func (f *fixture) joinReq(id string) JoinRequest {
	return JoinRequest{Group: "g", MemberID: id, ClientID: "c", ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range"}}, Topics: []string{"t"},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second}
}

func findJoin(out Output, tk Ticket) (JoinResult, bool) {
	for _, r := range out.Joins {
		if r.Ticket == tk {
			return r, true
		}
	}
	return JoinResult{}, false
}

func TestInitialRebalanceDelayFormsOneGeneration(t *testing.T) {
	f := newFixture(t, Config{InitialRebalanceDelay: 3 * time.Second})
	t1, out := f.c.Join(f.now, f.joinReq(""))
	if _, done := findJoin(out, t1); done {
		t.Fatal("first join answered before the initial delay")
	}
	f.now = f.now.Add(time.Second)
	t2, out := f.c.Join(f.now, f.joinReq(""))
	if len(out.Joins) != 0 {
		t.Fatalf("answered early: %+v", out.Joins)
	}
	if d, _ := f.c.NextDeadline(); !d.Equal(epoch.Add(3 * time.Second)) {
		t.Fatalf("next deadline %v", d.Sub(epoch))
	}
	out = f.c.Tick(epoch.Add(3 * time.Second))
	r1, ok1 := findJoin(out, t1)
	r2, ok2 := findJoin(out, t2)
	if !ok1 || !ok2 || r1.Generation != 1 || r2.Generation != 1 || r1.Err != nil {
		t.Fatalf("want both in generation 1, got %+v", out.Joins)
	}
}

func TestResentJoinAnswersOlderTicket(t *testing.T) {
	f := newFixture(t, Config{})
	tk, out := f.c.Join(f.now, f.joinReq(""))
	r, _ := findJoin(out, tk)
	f.c.Join(f.now, f.joinReq("")) // m2 waits
	f.c.Join(f.now, f.joinReq(r.MemberID))
	// Generation 2 has m1 and m2; m3 makes it rebalance again, and m1
	// joins twice while m2 has not rejoined yet.
	f.c.Join(f.now, f.joinReq(""))
	old, _ := f.c.Join(f.now, f.joinReq(r.MemberID))
	_, out = f.c.Join(f.now, f.joinReq(r.MemberID))
	if got, ok := findJoin(out, old); !ok || !errors.Is(got.Err, ErrRebalanceInProgress) {
		t.Fatalf("older ticket: %+v", out.Joins)
	}
}

func TestLeavingPendingMemberCompletesRebalance(t *testing.T) {
	f := newFixture(t, Config{})
	tk, out := f.c.Join(f.now, f.joinReq(""))
	m1, _ := findJoin(out, tk)
	req := f.joinReq("")
	req.RequireKnownMemberID = true
	tk, out = f.c.Join(f.now, req)
	pending, _ := findJoin(out, tk)
	if !errors.Is(pending.Err, ErrMemberIDRequired) || pending.MemberID == "" {
		t.Fatalf("want member id required, got %+v", pending)
	}
	// m1 syncs, then rejoins (leader, so a rebalance) and waits for the
	// pending id.
	f.c.Sync(f.now, SyncRequest{Group: "g", MemberID: m1.MemberID, Generation: 1})
	tk, out = f.c.Join(f.now, f.joinReq(m1.MemberID))
	if _, done := findJoin(out, tk); done {
		t.Fatal("completed while a handed-out member id is outstanding")
	}
	errs, out := f.c.Leave(f.now, "g", []MemberRef{{MemberID: pending.MemberID}})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if r, ok := findJoin(out, tk); !ok || r.Generation != 2 {
		t.Fatalf("want generation 2 after the pending member left, got %+v", out.Joins)
	}
	if err := f.c.Heartbeat(f.now, HeartbeatRequest{Group: "g", MemberID: m1.MemberID, Generation: 2}); err != nil {
		t.Fatalf("heartbeat in CompletingRebalance: %v", err)
	}
}

func TestLimits(t *testing.T) {
	f := newFixture(t, Config{MaxGroupSize: 1, MaxMetadataSize: 8})
	tk, out := f.c.Join(f.now, f.joinReq(""))
	m1, _ := findJoin(out, tk)
	tk, out = f.c.Join(f.now, f.joinReq(""))
	if r, _ := findJoin(out, tk); !errors.Is(r.Err, ErrGroupMaxSize) {
		t.Fatalf("second member: %+v", r)
	}
	_, out = f.c.Sync(f.now, SyncRequest{Group: "g", MemberID: m1.MemberID, Generation: 1, Protocol: "roundrobin"})
	if !errors.Is(out.Syncs[0].Err, ErrInconsistentProtocol) {
		t.Fatalf("sync with another protocol: %+v", out.Syncs)
	}
	f.c.Sync(f.now, SyncRequest{Group: "g", MemberID: m1.MemberID, Generation: 1})
	errs, out, err := f.c.Commit(f.now, CommitRequest{Group: "g", MemberID: m1.MemberID, Generation: 1, Offsets: []OffsetCommit{
		{Topic: "t", Partition: 0, Offset: 1, Metadata: strings.Repeat("m", 9)},
		{Topic: "t", Partition: 1, Offset: 2, Metadata: "ok"},
	}})
	if err != nil || !errors.Is(errs[0], ErrMetadataTooLarge) || errs[1] != nil || len(out.Events) != 1 || len(out.Events[0].Offsets) != 1 {
		t.Fatalf("commit: errs=%v err=%v events=%+v", errs, err, out.Events)
	}
	if _, err := f.c.ResetOffsets(f.now, "other", []OffsetCommit{{Topic: "t", Offset: 0, Metadata: strings.Repeat("m", 9)}}); !errors.Is(err, ErrMetadataTooLarge) {
		t.Fatalf("reset with oversized metadata: %v", err)
	}
}

func TestBadGroupsAndMembers(t *testing.T) {
	c := New(Config{})
	if err := c.Heartbeat(epoch, HeartbeatRequest{Group: "nope", MemberID: "x"}); !errors.Is(err, ErrUnknownMember) {
		t.Errorf("heartbeat: %v", err)
	}
	if _, out := c.Sync(epoch, SyncRequest{Group: "nope", MemberID: "x"}); !errors.Is(out.Syncs[0].Err, ErrUnknownMember) {
		t.Errorf("sync: %+v", out.Syncs)
	}
	if errs, _ := c.Leave(epoch, "nope", []MemberRef{{MemberID: "x"}}); !errors.Is(errs[0], ErrUnknownMember) {
		t.Errorf("leave: %v", errs)
	}
	if _, err := c.Delete("nope"); !errors.Is(err, ErrGroupNotFound) {
		t.Errorf("delete: %v", err)
	}
	if _, out := c.Join(epoch, JoinRequest{Group: "g", MemberID: "ghost", ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range"}}, SessionTimeout: 10 * time.Second}); !errors.Is(out.Joins[0].Err, ErrUnknownMember) {
		t.Errorf("join with unknown id: %+v", out.Joins)
	}
	if _, out := c.Join(epoch, JoinRequest{Group: "g", SessionTimeout: 10 * time.Second}); !errors.Is(out.Joins[0].Err, ErrInconsistentProtocol) {
		t.Errorf("join without protocols: %+v", out.Joins)
	}
	// Generation -1 means "not group-managed": a stale member id does not
	// make it a member's commit (Kafka accepts it too).
	if _, _, err := c.Commit(epoch, CommitRequest{Group: "g", MemberID: "x", Generation: -1}); err != nil {
		t.Errorf("generation -1 commit carrying a member id: %v", err)
	}
	if len(c.List()) != 1 { // the refused joins left an Empty group behind
		t.Errorf("list: %+v", c.List())
	}
	c.Tick(epoch)
	if len(c.List()) != 0 {
		t.Errorf("Tick kept an empty group without offsets: %+v", c.List())
	}
	if _, ok := c.NextDeadline(); ok {
		t.Error("deadline with no groups")
	}
	if out := c.SetPartitions(epoch, "t", 3); !out.Empty() {
		t.Errorf("SetPartitions with no groups: %+v", out)
	}
}

func TestDeleteRefusedWhileMemberIDPending(t *testing.T) {
	f := newFixture(t, Config{})
	req := f.joinReq("")
	req.RequireKnownMemberID = true
	f.c.Join(f.now, req)
	if _, err := f.c.Delete("g"); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := f.c.ResetOffsets(f.now, "g", nil); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("reset: %v", err)
	}
	f.c.Tick(f.now.Add(10 * time.Second))
	if _, ok := f.c.Describe("g"); ok {
		t.Fatal("expired pending id kept the group")
	}
}

func TestTransitionsReported(t *testing.T) {
	f := newFixture(t, Config{})
	var got []string
	record := func(out Output) {
		for _, tr := range out.Transitions {
			got = append(got, tr.From.String()+">"+tr.To.String())
		}
	}
	tk, out := f.c.Join(f.now, f.joinReq(""))
	record(out)
	m1, _ := findJoin(out, tk)
	_, out = f.c.Sync(f.now, SyncRequest{Group: "g", MemberID: m1.MemberID, Generation: 1})
	record(out)
	_, out = f.c.Leave(f.now, "g", []MemberRef{{MemberID: m1.MemberID}})
	record(out)
	if s := strings.Join(got, " "); s != "Empty>PreparingRebalance PreparingRebalance>CompletingRebalance CompletingRebalance>Stable Stable>PreparingRebalance PreparingRebalance>Empty" {
		t.Fatalf("transitions: %s", s)
	}
	if len(out.Removed) != 1 || out.Removed[0].Reason != RemovedLeft {
		t.Fatalf("removals: %+v", out.Removed)
	}
}
