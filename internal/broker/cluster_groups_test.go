package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
)

// The apply path of replicated group offsets, without a cluster: the hook applies each
// committed entry's events to the local coordinator and journal, a replay of the same
// entries (a restart re-applying the log's tail) ends in the same state, Checkpoint makes
// them survive a power cut, and a malformed payload changes nothing.
func TestGroupOffsetsHookApplies(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 2)
	at := time.UnixMilli(1_700_000_000_000)
	commit := func(p int32, off int64) group.Event {
		return group.Event{Type: group.EventOffsetsCommitted, Group: "g", Time: at,
			Offsets: []group.CommittedOffset{{Topic: "t", Partition: p, Committed: group.Committed{Offset: off, LeaderEpoch: -1, CommitTime: at}}}}
	}
	entries := [][]group.Event{
		{commit(0, 5), commit(1, 7)},
		{{Type: group.EventOffsetsDeleted, Group: "g", Time: at, Offsets: []group.CommittedOffset{{Topic: "t", Partition: 1}}}, commit(0, 9)},
		{{Type: group.EventGroupProtocol, Group: "g", ProtocolType: "consumer", Mode: group.LeaderAssigns}},
	}
	var payloads [][]byte
	for _, evs := range entries {
		b, err := encodeGroupEvents(evs)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, b)
	}
	hook := func() *clusterGroups { return newClusterGroups(e.b.streams.groups, nil) }
	check := func(when string) {
		t.Helper()
		if got, ok := e.b.FetchOffset("g", "t", 0); !ok || got.Offset != 9 {
			t.Fatalf("%s: t/0 committed %+v %v, want 9", when, got, ok)
		}
		if got, ok := e.b.FetchOffset("g", "t", 1); ok {
			t.Fatalf("%s: t/1 committed %+v, want none (deleted)", when, got)
		}
		if info, _ := e.b.DescribeGroup("g"); info.ProtocolType != "consumer" {
			t.Fatalf("%s: protocol type %q", when, info.ProtocolType)
		}
	}
	h := hook()
	for i, p := range payloads {
		if err := h.ApplyGroupOffsets(uint64(10+i), p); err != nil {
			t.Fatal(err)
		}
	}
	check("applied")
	for i, p := range payloads { // the tail again, as after a restart
		if err := h.ApplyGroupOffsets(uint64(10+i), p); err != nil {
			t.Fatal(err)
		}
	}
	check("replayed")
	if err := h.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	e.crash()
	check("after a power cut after the checkpoint")

	h = hook()
	for _, bad := range [][]byte{nil, {2}, {groupEventsVersion, 0}, {groupEventsVersion, 1, 3, 1, 2}, append(payloads[0], 0)} {
		if err := h.ApplyGroupOffsets(20, bad); !errors.Is(err, errBadGroupEvents) {
			t.Errorf("payload %x: %v, want errBadGroupEvents", bad, err)
		}
	}
	check("after malformed payloads")
	if err := h.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// A single node coordinates every group: CheckCoordinator never refuses.
func TestCheckCoordinatorSingleNode(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.b.CheckCoordinator(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeGroupEvents: no payload panics the decoder; what it accepts encodes back to
// the same bytes.
func FuzzDecodeGroupEvents(f *testing.F) {
	at := time.UnixMilli(1_700_000_000_000)
	b, _ := encodeGroupEvents([]group.Event{{Type: group.EventOffsetsCommitted, Group: "g", Time: at,
		Offsets: []group.CommittedOffset{{Topic: "t", Partition: 3, Committed: group.Committed{Offset: -2, LeaderEpoch: 4, Metadata: "m", CommitTime: at}}}},
		{Type: group.EventGroupDeleted, Group: "h"}})
	f.Add(b)
	f.Add([]byte{groupEventsVersion, 1, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, _, err := decodeGroupEvents(b)
		if err != nil {
			return
		}
		again, err := encodeGroupEvents(evs)
		if err != nil {
			t.Fatalf("re-encoding accepted events: %v", err)
		}
		if _, _, err := decodeGroupEvents(again); err != nil {
			t.Fatalf("re-encoded payload refused: %v", err)
		}
	})
}

// In a cluster the coordinator applies a change before its metadata entry commits; the
// group journal's snapshot must hold only what was journaled (applied entries), so a
// change whose entry never commits is not on disk when the coordinator is rebuilt or the
// node restarts. (With the coordinator's own state in the snapshot, t/0 comes back at 50.)
func TestClusterGroupSnapshotLeavesOutUncommitted(t *testing.T) {
	e := newEnv(t, nil) // SnapshotEvery 50: a clean close snapshots after 5 events
	e.createTopic("t", 1)
	g := e.b.streams.groups
	c := newClusterGroups(g, nil)
	at := time.UnixMilli(1_700_000_000_000)
	for i := range 8 {
		b, err := encodeGroupEvents([]group.Event{{Type: group.EventOffsetsCommitted, Group: "g", Time: at,
			Offsets: []group.CommittedOffset{{Topic: "t", Partition: 0, Committed: group.Committed{Offset: int64(i), LeaderEpoch: -1, CommitTime: at}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyGroupOffsets(uint64(10+i), b); err != nil {
			t.Fatal(err)
		}
	}
	// The coordinator's commit, applied in memory; its entry never commits.
	g.mu.Lock()
	_, _, err := g.coord.Commit(e.clock.Now(), group.CommitRequest{Group: "g", Generation: -1,
		Offsets: []group.OffsetCommit{{Topic: "t", Partition: 0, Offset: 50, LeaderEpoch: -1}}})
	g.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	inMemory, _ := g.coord.Fetch("g", "t", 0)
	g.mu.Unlock()
	if inMemory.Offset != 50 {
		t.Fatalf("memory holds %d, want the uncommitted 50", inMemory.Offset)
	}
	// A fetch answers what committed, never the change applied ahead of its commit.
	if got, _ := e.b.FetchOffset("g", "t", 0); got.Offset != 7 {
		t.Fatalf("FetchOffset %d, want 7 (the last applied entry), not the uncommitted 50", got.Offset)
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	e.restart() // the clean close snapshots the group journal
	if got, _ := e.b.FetchOffset("g", "t", 0); got.Offset != 7 {
		t.Fatalf("after a restart t/0 is at %d, want 7 (the last applied entry)", got.Offset)
	}
}

// TestCheckpointWaitsBesideTheReadyLoop: the metadata snapshot's encoding calls Checkpoint
// off the Ready loop (meta/capture.go). While it waits for a journal write, the Ready loop
// still queues the next ones (it used to wait holding the lock they need); a second
// Checkpoint, reset's, returns only once the first one's writes are durable too; and what
// the first waits for still counts as queued for reset, which must not reload the
// coordinator from a journal missing them.
func TestCheckpointWaitsBesideTheReadyLoop(t *testing.T) {
	e := newEnv(t, nil)
	c := newClusterGroups(e.b.streams.groups, nil)
	first, second := make(chan error, 1), make(chan error, 1)
	c.umu.Lock()
	c.unsynced = append(c.unsynced, first)
	c.umu.Unlock()
	encoding := make(chan error, 1)
	go func() { encoding <- c.Checkpoint() }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.umu.Lock()
		taken := c.waited == 1
		c.umu.Unlock()
		if taken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first Checkpoint never took the queued write")
		}
	}
	applied := make(chan struct{})
	go func() {
		c.g.mu.Lock()
		c.unsyncedLocked(second)
		c.g.mu.Unlock()
		close(applied)
	}()
	select {
	case <-applied:
	case <-time.After(5 * time.Second):
		t.Fatal("a journal write could not be queued while a Checkpoint waited")
	}
	if n := c.notDurable(); n != 2 {
		t.Fatalf("%d writes count as queued for reset, want 2 (one waited for, one new)", n)
	}
	resetting := make(chan error, 1)
	go func() { resetting <- c.Checkpoint() }()
	second <- nil
	select {
	case err := <-resetting:
		t.Fatalf("a second Checkpoint returned (%v) while the first's write was not durable", err)
	case <-time.After(50 * time.Millisecond):
	}
	first <- nil
	for name, ch := range map[string]chan error{"the encoding's": encoding, "reset's": resetting} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s Checkpoint: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s Checkpoint never returned", name)
		}
	}
	if n := c.notDurable(); n != 0 {
		t.Fatalf("%d writes still queued after both Checkpoints", n)
	}
}
