package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// produceToPart produces n records to topic/p through its leader.
func (c *memCluster) produceToPart(topic string, p int32, n int) {
	c.t.Helper()
	for i := range n {
		for attempt := 0; ; attempt++ {
			b := c.nodes[c.leaderID(topic, p, 0)].b
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := b.Produce(ctx, topic, []ProduceRecord{{Value: []byte(fmt.Sprint(i)), Partition: &p}}, ProduceOptions{})
			cancel()
			if err == nil {
				break
			}
			if attempt == 100 || !(errors.Is(err, ErrNotLeader) || errors.Is(err, ErrReplicationUnknown)) {
				c.t.Fatalf("produce %d to %s/%d: %v", i, topic, p, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestClusterShareAlterOffsets: AlterShareGroupOffsets on a three-node cluster, on the
// group's coordinator, for partitions it leads and partitions other nodes lead (asked
// over a node-to-node request). A group with a member is refused; an empty group's start
// moves forward on every replica, the records below it are never delivered (the one a
// departed member still held included) and the next member starts there; a start below
// the current one, or past the high watermark, is refused and moves nothing; a topic the
// group had no state for gets it; a node other than the coordinator answers NOT_COORDINATOR.
func TestClusterShareAlterOffsets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const parts = 3 // preferred leaders on all three nodes: the coordinator leads at most one
	c := newMemCluster(t, 3)
	cid, ctl := c.coordinator()
	c.setShareConfig(cid, "g", ShareAutoOffsetResetKey, "earliest")
	for _, topic := range []string{"t", "u"} {
		if _, err := ctl.CreateTopic(TopicSettings{Name: topic, Partitions: parts}); err != nil {
			t.Fatal(err)
		}
		for p := range int32(parts) {
			c.produceToPart(topic, p, 10)
		}
	}
	if res := ctl.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: "g", MemberID: "m", Topics: []string{"t"}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	sp := SharePartition{Topic: "t", Partition: 0}
	lb := c.nodes[c.leaderID("t", 0, 0)].b
	held := fetchUntil(t, lb, &ShareFetchRequest{Group: "g", MemberID: "m", Add: []SharePartition{sp}, MaxRecords: 3, MaxWait: time.Second}, sp, 3)
	if err := ctl.AlterShareGroupOffset("g", "t", 0, 4); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("alter with a member: %v, want ErrGroupNotEmpty", err)
	}
	if res := ctl.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: -1}); res.Err != nil {
		t.Fatal(res.Err)
	}

	ledHere := 0
	for p := range int32(parts) {
		if c.leaderID("t", p, 0) == cid {
			ledHere++
		}
		if err := ctl.AlterShareGroupOffset("g", "t", p, 4); err != nil {
			t.Fatalf("alter t/%d to 4 (led by n%d, coordinator n%d): %v", p, c.leaderID("t", p, 0), cid, err)
		}
	}
	if ledHere == parts {
		t.Fatalf("the coordinator n%d leads every partition: no alter went over a request", cid)
	}
	var inv *InvalidArgumentError
	if err := ctl.AlterShareGroupOffset("g", "t", 1, 2); !errors.As(err, &inv) {
		t.Fatalf("alter t/1 to 2, below its start 4: %v, want an invalid argument", err)
	}
	if err := ctl.AlterShareGroupOffset("g", "t", 1, 11); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("alter t/1 to 11, past its high watermark 10: %v, want ErrOffsetOutOfRange", err)
	}
	if err := ctl.AlterShareGroupOffset("g", "t", parts, 0); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("alter of a partition t lacks: %v", err)
	}
	for _, id := range c.ids {
		if id == cid {
			continue
		}
		if err := c.nodes[id].b.AlterShareGroupOffset("g", "t", 0, 5); !errors.Is(err, ErrNotCoordinator) {
			t.Fatalf("alter on n%d, not the coordinator: %v, want ErrNotCoordinator", id, err)
		}
	}
	if err := ctl.AlterShareGroupOffset("g", "u", 2, 7); err != nil { // no state for u yet
		t.Fatalf("alter u/2 to 7: %v", err)
	}
	c.cursorsAgree(t, "t", parts)
	c.cursorsAgree(t, "u", parts)
	for _, id := range c.ids { // every replica's start moved
		for _, want := range []struct {
			topic string
			p     int32
			start int64
		}{{"t", 0, 4}, {"t", 1, 4}, {"t", 2, 4}, {"u", 2, 7}, {"u", 0, 0}} {
			offs, err := c.nodes[id].b.ShareGroupOffsets("g", want.topic)
			if err != nil || offs[want.p].Start != want.start {
				t.Fatalf("n%d: %s/%d: %+v %v, want start %d", id, want.topic, want.p, offs, err, want.start)
			}
		}
	}

	// The next member starts at 4 everywhere: 0-2, which the departed member held, and 3,
	// never delivered, are finished.
	if res := ctl.ShareGroupHeartbeat(context.Background(), ShareHeartbeatRequest{Group: "g", MemberID: "n", Topics: []string{"t", "u"}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	for p := range int32(parts) {
		sp := SharePartition{Topic: "t", Partition: p}
		got := fetchUntil(t, c.nodes[c.leaderID("t", p, 0)].b,
			&ShareFetchRequest{Group: "g", MemberID: "n", Add: []SharePartition{sp}, MaxRecords: 10, MaxWait: time.Second}, sp, 6)
		for o := range got {
			if o < 4 {
				t.Fatalf("t/%d@%d delivered after the start moved to 4 (the departed member held %v of t/0)", p, o, held)
			}
		}
	}
}
