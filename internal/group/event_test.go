package group

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleEvents() []Event {
	at := time.UnixMilli(1_767_225_600_123)
	return []Event{
		{Type: EventGroupDeleted, Group: "g"},
		{Type: EventOffsetsCommitted, Group: "orders-consumers", Time: at},
		{Type: EventOffsetsCommitted, Group: "g", Time: at, Offsets: []CommittedOffset{
			{Topic: "orders", Partition: 0, Committed: Committed{Offset: 0, LeaderEpoch: -1, CommitTime: at}},
			{Topic: "orders", Partition: 2147483647, Committed: Committed{Offset: 1<<63 - 1, LeaderEpoch: 2147483647, Metadata: "m", CommitTime: at}},
			{Topic: "ünïcode", Partition: 7, Committed: Committed{Offset: 42, LeaderEpoch: -2147483648, Metadata: strings.Repeat("x", 300), CommitTime: at}},
		}},
		{Type: EventOffsetsDeleted, Group: "g", Time: at, Offsets: []CommittedOffset{
			{Topic: "orders", Partition: 3, Committed: Committed{CommitTime: at}},
		}},
		{Type: EventGroupProtocol, Group: "g", ProtocolType: "consumer", Mode: LeaderAssigns},
		{Type: EventGroupProtocol, Group: "native", ProtocolType: "sluice", Mode: BrokerAssigns},
		{Type: EventOffsetsCommitted, Group: "reset", Time: at, Offsets: []CommittedOffset{
			{Topic: "t", Partition: 0, Committed: Committed{Offset: -2, LeaderEpoch: -1, CommitTime: at}},
			{Topic: "t", Partition: 1, Committed: Committed{Offset: -1, LeaderEpoch: -1, CommitTime: at}},
			{Topic: "t", Partition: 2, Committed: Committed{Offset: 1<<63 - 1, LeaderEpoch: -1, CommitTime: at}},
		}},
		{Type: EventOffsetsCommitted, Group: "before-1970", Time: time.UnixMilli(-5), Offsets: []CommittedOffset{
			{Topic: "t", Partition: 1, Committed: Committed{Offset: 1, CommitTime: time.UnixMilli(-5)}},
		}},
		{Type: EventGroupMembers, Group: "g", ProtocolType: "consumer", Mode: LeaderAssigns, Members: &Membership{
			Generation: 7, State: Stable, Protocol: "cooperative-sticky", Leader: "m-2",
			Members: []MemberRecord{
				{ID: "m-2", InstanceID: "pod-0", ClientID: "c", ClientHost: "/127.0.0.1", SessionTimeout: 45 * time.Second,
					RebalanceTimeout: time.Minute, Protocols: []Protocol{{Name: "cooperative-sticky", Metadata: []byte{0, 1}}, {Name: "range"}},
					Topics: []string{"orders"}, Assignment: []byte{0, 3, 0}},
				{ID: "m-3", SessionTimeout: 6 * time.Second},
			}}},
		{Type: EventGroupMembers, Group: "native", ProtocolType: "sluice", Mode: BrokerAssigns, Members: &Membership{
			Generation: 2, State: Stable, Protocol: "range", Leader: "a",
			Members: []MemberRecord{{ID: "a", Topics: []string{"t"}, Partitions: []TopicPartitions{{Topic: "t", Partitions: []int32{0, 2}}}}},
		}},
		{Type: EventGroupMembers, Group: "emptied", ProtocolType: "consumer", Members: &Membership{Generation: 9, State: Empty}},
		fullConsumerEvent("kip848", sampleConsumerGroup()),
		fullConsumerEvent("kip848-left", newConsumerGroup()),
		{Type: EventConsumerMembers, Group: "kip848", Consumer: &ConsumerMembership{raw: consumerRecord{
			header: appendConsumerHeader(nil, sampleConsumerGroup()), removed: []string{"a", "z"},
			members: [][]byte{appendConsumerMember(nil, sampleConsumerGroup().members["b"], nil)}}.append(nil)}},
	}
}

// sampleConsumerGroup is a consumer group mid-reconciliation: one member
// revoking a partition the other waits for.
func sampleConsumerGroup() *consumerGroup {
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch, cg.assignor = 5, 5, AssignorUniform
	a := &cmember{id: "a", instanceID: "pod-0", rackID: "r1", clientID: "c", clientHost: "/10.0.0.1", epoch: 4, prevEpoch: 3,
		state: memberUnrevoked, assigned: map[topicPartition]int32{{"t", 0}: 2}, revoking: tpSet{{"t", 1}: true},
		topics: []string{"t"}, assignor: AssignorUniform, rebalanceTimeout: 30 * time.Second, seq: 1}
	b := &cmember{id: "b", epoch: 5, state: memberUnreleased, assigned: map[topicPartition]int32{{"u", 3}: 5},
		regex: "u.*", topics: []string{}, seq: 2}
	cg.members = map[string]*cmember{"a": a, "b": b}
	cg.target = map[string]tpSet{"a": {{"t", 0}: true}, "b": {{"t", 1}: true, {"u", 3}: true}}
	cg.seq = 2
	return cg
}

func TestEventRoundTrip(t *testing.T) {
	for _, ev := range sampleEvents() {
		raw, err := ev.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalEvent(raw)
		if err != nil {
			t.Fatalf("%+v: %v", ev, err)
		}
		if !eventsEqual(got, ev) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, ev)
		}
		// Every strict prefix is refused, as is any trailing byte.
		for n := range len(raw) {
			if _, err := UnmarshalEvent(raw[:n]); !errors.Is(err, ErrCorruptEvent) {
				t.Fatalf("prefix %d of %x accepted: %v", n, raw, err)
			}
		}
		if _, err := UnmarshalEvent(append(raw, 0)); !errors.Is(err, ErrCorruptEvent) {
			t.Fatalf("trailing byte accepted: %v", err)
		}
	}
}

// eventsEqual compares times with Equal (locations differ after decoding).
func eventsEqual(a, b Event) bool {
	if a.Type != b.Type || a.Group != b.Group || !a.Time.Equal(b.Time) || len(a.Offsets) != len(b.Offsets) ||
		a.ProtocolType != b.ProtocolType || a.Mode != b.Mode || fmt.Sprint(a.Members) != fmt.Sprint(b.Members) {
		return false
	}
	for i := range a.Offsets {
		x, y := a.Offsets[i], b.Offsets[i]
		if !x.CommitTime.Equal(y.CommitTime) {
			return false
		}
		x.CommitTime, y.CommitTime = time.Time{}, time.Time{}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func TestEventRejects(t *testing.T) {
	for name, raw := range map[string][]byte{
		"empty":          {},
		"version":        {2, 1, 1, 'g', 0, 0},
		"type":           {1, 9, 1, 'g'},
		"empty group":    {1, 2, 0},
		"huge count":     {1, 1, 1, 'g', 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"string overrun": {1, 2, 5, 'g'},
		"partition>int32": {1, 1, 1, 'g', 0, 1, 1, 't',
			0x80, 0x80, 0x80, 0x80, 0x08, 0, 0, 0},
		"empty topic":      {1, 1, 1, 'g', 0, 1, 0, 0, 0, 0, 0},
		"empty protocol":   {1, 4, 1, 'g', 0, 0},
		"unknown mode":     {1, 4, 1, 'g', 1, 'c', 9},
		"protocol no mode": {1, 4, 1, 'g', 1, 'c'},
	} {
		if _, err := UnmarshalEvent(raw); !errors.Is(err, ErrCorruptEvent) {
			t.Errorf("%s: got %v, want ErrCorruptEvent", name, err)
		}
	}
	bad := Event{Type: EventOffsetsCommitted, Group: "g", Offsets: []CommittedOffset{{Topic: "t", Partition: -1}}}
	if _, err := bad.MarshalBinary(); !errors.Is(err, ErrCorruptEvent) {
		t.Errorf("marshal of a negative partition: %v", err)
	}
	if err := New(Config{}).Apply(bad); !errors.Is(err, ErrCorruptEvent) {
		t.Errorf("apply of a negative partition: %v", err)
	}
}

// FuzzUnmarshalEvent: arbitrary bytes never panic, and whatever decodes
// re-encodes to the same bytes (the encoding is canonical).
func FuzzUnmarshalEvent(f *testing.F) {
	for _, ev := range sampleEvents() {
		raw, _ := ev.MarshalBinary()
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := UnmarshalEvent(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptEvent) {
				t.Fatalf("error %v does not wrap ErrCorruptEvent", err)
			}
			return
		}
		raw, err := ev.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		if string(raw) != string(data) {
			t.Fatalf("not canonical:\n in %x\nout %x", data, raw)
		}
		if err := New(Config{}).Apply(ev); err != nil {
			t.Fatalf("decoded event does not apply: %v", err)
		}
	})
}

// TestSnapshotRebuildsOffsets: a coordinator rebuilt from Snapshot has the
// same offsets (and commit times) as the one that produced it, and a
// re-commit of unchanged offsets is not journaled.
func TestSnapshotRebuildsOffsets(t *testing.T) {
	c := New(Config{})
	commit := func(at time.Duration, group string, offs ...OffsetCommit) Output {
		_, out, err := c.Commit(epoch.Add(at), CommitRequest{Group: group, Generation: -1, Offsets: offs})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	commit(0, "a", OffsetCommit{Topic: "t", Partition: 0, Offset: 5}, OffsetCommit{Topic: "t", Partition: 1, Offset: 6})
	commit(time.Second, "a", OffsetCommit{Topic: "t", Partition: 1, Offset: 9, Metadata: "x"})
	commit(2*time.Second, "b", OffsetCommit{Topic: "u", Partition: 3, Offset: 1})
	if out := commit(3*time.Second, "a", OffsetCommit{Topic: "t", Partition: 0, Offset: 5}); len(out.Events) != 0 {
		t.Fatalf("unchanged re-commit journaled: %+v", out.Events)
	}
	snap := c.Snapshot()
	if len(snap) != 3 {
		t.Fatalf("want 3 events (a@0, a@1s, b@2s), got %d", len(snap))
	}
	fresh := replayed(t, snap)
	for _, g := range []string{"a", "b"} {
		want, got := c.Offsets(g), fresh.Offsets(g)
		if len(want) != len(got) {
			t.Fatalf("%s: %v vs %v", g, want, got)
		}
		for i := range want {
			if want[i].Topic != got[i].Topic || want[i].Partition != got[i].Partition ||
				want[i].Offset != got[i].Offset || want[i].Metadata != got[i].Metadata ||
				!want[i].CommitTime.Equal(got[i].CommitTime) {
				t.Fatalf("%s[%d]: %+v vs %+v", g, i, want[i], got[i])
			}
		}
	}
}

// replayed is a fresh coordinator that applied evs through their encoding,
// as a restart replays the journal.
func replayed(t *testing.T, evs []Event) *Coordinator {
	t.Helper()
	return replayedWith(t, Config{}, evs)
}

// TestEventTypesListed: EventTypes lists exactly the types validate knows, so a new type
// cannot be added without the list (and the cluster's feature-level table) hearing of it.
func TestEventTypesListed(t *testing.T) {
	listed := map[EventType]bool{}
	for _, typ := range EventTypes() {
		listed[typ] = true
	}
	for typ := range 256 {
		err := Event{Type: EventType(typ), Group: "g"}.validate()
		known := err == nil || !strings.Contains(err.Error(), "unknown type")
		if known != listed[EventType(typ)] {
			t.Errorf("type %d: validate knows it %v, EventTypes lists it %v", typ, known, listed[EventType(typ)])
		}
	}
}
