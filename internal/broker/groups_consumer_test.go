package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
)

// TestConsumerGroupAcrossRestartAndCrash: a KIP-848 member's commit at its
// epoch is durable through a restart and a power cut; membership is not
// (soft state): the member's heartbeat after either is UNKNOWN_MEMBER_ID,
// it rejoins with epoch 0 and gets its partitions, the offset still there.
// Sessions expire on the broker's clock (Maintain ticks the coordinator).
func TestConsumerGroupAcrossRestartAndCrash(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 2)
	join := group.ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeout: time.Minute,
		Topics: []string{"t"}, Owned: []group.TopicPartitions{}}
	joined := func() group.ConsumerHeartbeatResult {
		t.Helper()
		r := e.b.ConsumerGroupHeartbeat(context.Background(), join)
		if r.Err != nil || len(r.Assignment) != 1 || len(r.Assignment[0].Partitions) != 2 {
			t.Fatalf("join: %+v", r)
		}
		return r
	}
	r := joined()
	errs, err := e.b.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", MemberID: "m", Generation: r.MemberEpoch,
		Offsets: []group.OffsetCommit{{Topic: "t", Partition: 0, Offset: 17, LeaderEpoch: -1}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("commit: %v %v", err, errs)
	}
	hb := group.ConsumerHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: r.MemberEpoch, RebalanceTimeout: -1}
	for _, bounce := range []func(){e.restart, e.crash} {
		bounce()
		if got := e.b.ConsumerGroupHeartbeat(context.Background(), hb); !errors.Is(got.Err, group.ErrUnknownMember) {
			t.Fatalf("heartbeat after a restart: %+v", got)
		}
		r = joined()
		if c, ok := e.b.FetchOffset("g", "t", 0); !ok || c.Offset != 17 {
			t.Fatalf("offset after a restart: %+v %v", c, ok)
		}
		hb.MemberEpoch = r.MemberEpoch
	}
	// No heartbeat for the session timeout (45 s by default): removed.
	e.clock.Advance(46 * time.Second)
	e.b.Maintain()
	if got := e.b.ConsumerGroupHeartbeat(context.Background(), hb); !errors.Is(got.Err, group.ErrUnknownMember) {
		t.Fatalf("heartbeat after the session timeout: %+v", got)
	}
}
