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
	hook := func() *clusterGroups { return &clusterGroups{g: e.b.streams.groups} }
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
