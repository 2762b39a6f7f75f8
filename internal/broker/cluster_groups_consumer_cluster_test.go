package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
)

// TestClusterConsumerGroupOnController: a KIP-848 consumer group in a
// three-node cluster lives on the controller, as classic groups do. Its
// member's commit at its epoch is replicated; the other nodes answer its
// heartbeat NOT_COORDINATOR; when the controller loses power the next one
// has the group's record: the member's heartbeat at its epoch is accepted
// with its partitions unchanged, it commits at that epoch, and the
// committed offset is still there. (Before consumer groups were recorded
// the heartbeat was UNKNOWN_MEMBER_ID and the member rejoined at epoch 0.)
func TestClusterConsumerGroupOnController(t *testing.T) {
	c, id, ctl := newGroupCluster(t)
	join := group.ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeout: time.Minute,
		Topics: []string{"t"}, Owned: []group.TopicPartitions{}}
	var res group.ConsumerHeartbeatResult
	for deadline := time.Now().Add(10 * time.Second); ; { // the topic reaches the coordinator's groups
		if res = ctl.ConsumerGroupHeartbeat(context.Background(), join); res.Err != nil {
			t.Fatal(res.Err)
		}
		if len(res.Assignment) == 1 && len(res.Assignment[0].Partitions) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("join: %+v", res)
		}
		join.MemberEpoch, join.Owned = res.MemberEpoch, res.Assignment
		time.Sleep(20 * time.Millisecond)
	}
	errs, err := ctl.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", MemberID: "m", Generation: res.MemberEpoch,
		Offsets: []group.OffsetCommit{{Topic: "t", Partition: 1, Offset: 42, LeaderEpoch: -1}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("commit at the member's epoch: %v %v", err, errs)
	}
	hb := group.ConsumerHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: res.MemberEpoch, RebalanceTimeout: -1}
	for _, other := range c.ids {
		if other != id {
			var nc *NotCoordinatorError
			if r := c.nodes[other].b.ConsumerGroupHeartbeat(context.Background(), hb); !errors.As(r.Err, &nc) {
				t.Fatalf("heartbeat on n%d (n%d coordinates): %v", other, id, r.Err)
			}
		}
	}
	c.crash(id, true)
	_, nb := c.coordinator()
	hb.Owned = res.Assignment
	if r := nb.ConsumerGroupHeartbeat(context.Background(), hb); r.Err != nil || r.MemberEpoch != res.MemberEpoch ||
		(r.HasAssignment && (len(r.Assignment) != 1 || len(r.Assignment[0].Partitions) != 2)) {
		t.Fatalf("heartbeat at epoch %d on the new coordinator: %+v", res.MemberEpoch, r)
	}
	errs, err = nb.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", MemberID: "m", Generation: res.MemberEpoch,
		Offsets: []group.OffsetCommit{{Topic: "t", Partition: 0, Offset: 7, LeaderEpoch: -1}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("commit at the member's epoch on the new coordinator: %v %v", err, errs)
	}
	if got, ok := nb.FetchOffset("g", "t", 1); !ok || got.Offset != 42 {
		t.Fatalf("the new coordinator has t/1 at %+v %v, committed 42", got, ok)
	}
	info, _ := nb.DescribeGroup("g")
	if info.Type != group.TypeConsumer || len(info.Members) != 1 || info.Members[0].MemberEpoch != res.MemberEpoch {
		t.Fatalf("the new coordinator describes %+v", info)
	}
	c.start(id)
}
