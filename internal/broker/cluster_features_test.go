package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/group"
)

// featureLevelIs waits until every running node's catalog is at level.
func (c *memCluster) featureLevelIs(level int) {
	c.t.Helper()
	c.eventually(c.t, fmt.Sprintf("every node at feature level %d", level), func() error {
		for _, id := range c.ids {
			if b := c.nodes[id].b; b != nil {
				if got := b.cluster.meta.State().FeatureLevel(); got != level {
					return fmt.Errorf("n%d is at level %d", id, got)
				}
			}
		}
		return nil
	})
}

// TestClusterFeatureLevelWaitsForEveryNode: a rolling upgrade, in one process. Node 3
// says it reads only the base level (an older binary, or one an operator holds back):
//   - the controller names it as what holds the level, every node stays at the base level,
//     and no membership record is written: a group's member is unknown to the next
//     coordinator after a power cut, as before the records existed;
//   - node 3 comes to read this binary's level: the level rises on every node, the
//     group formed before is recorded, and after the next power cut of the coordinator
//     its member's heartbeat of the same generation is accepted.
func TestClusterFeatureLevelWaitsForEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := startMemCluster(&memCluster{t: t, advertise: map[multiraft.NodeID]int{3: meta.LevelBase}}, 3)
	c.eventually(t, "the controller names node 3 as holding the level", func() error {
		_, b := c.coordinator()
		st, err := b.ClusterStatus()
		if err != nil || len(st.FeatureLevelHeldBy) != 1 || !strings.HasPrefix(st.FeatureLevelHeldBy[0], "node 3 ") {
			return fmt.Errorf("held by %q (%v)", st.FeatureLevelHeldBy, err)
		}
		return nil
	})
	for _, id := range c.ids {
		st, err := c.nodes[id].b.ClusterStatus()
		if err != nil || st.FeatureLevel != meta.LevelBase {
			t.Fatalf("n%d: feature level %d (%v), want %d while node 3 reads no more", id, st.FeatureLevel, err, meta.LevelBase)
		}
		if want := map[bool]int{true: meta.LevelBase, false: meta.MaxFeatureLevel}[id == 3]; st.ReadsFeatureLevel != want {
			t.Fatalf("n%d says it reads level %d, want %d", id, st.ReadsFeatureLevel, want)
		}
	}
	_, ctl := c.coordinator()
	if _, err := ctl.CreateTopic(TopicSettings{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stable := func() group.JoinResult {
		t.Helper()
		j, err := retryCoordinator(c, func(b *Broker) (group.JoinResult, error) {
			return b.JoinGroup(ctx, group.JoinRequest{Group: "g", ClientID: "c", ProtocolType: "consumer",
				Protocols: []group.Protocol{{Name: "range", Metadata: []byte("m")}}, Topics: []string{"t"},
				SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second})
		})
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		if _, err := retryCoordinator(c, func(b *Broker) (group.SyncResult, error) {
			return b.SyncGroup(ctx, group.SyncRequest{Group: "g", MemberID: j.MemberID, Generation: j.Generation,
				Assignments: map[string][]byte{j.MemberID: []byte("all")}})
		}); err != nil {
			t.Fatalf("sync: %v", err)
		}
		return j
	}
	heartbeat := func(j group.JoinResult) error {
		_, err := retryCoordinator(c, func(b *Broker) (struct{}, error) {
			return struct{}{}, b.Heartbeat(group.HeartbeatRequest{Group: "g", MemberID: j.MemberID, Generation: j.Generation})
		})
		return err
	}
	powerCut := func() {
		t.Helper()
		id, _ := c.coordinator()
		c.crash(id, true)
		c.coordinator()
		c.start(id)
	}

	a := stable()
	powerCut()
	if err := heartbeat(a); !errors.Is(err, group.ErrUnknownMember) {
		t.Fatalf("below the level, the member's heartbeat after a power cut of its coordinator: %v, want UNKNOWN_MEMBER_ID (nothing recorded)", err)
	}
	a = stable() // formed again at the base level: in the controller's memory only

	// Node 3 reads this binary's level from now on. (Restarting it instead would lose the
	// group when node 3 is the controller: below the level, membership is memory only.)
	c.nodes[3].b.cluster.meta.AdvertiseFeatureLevel(meta.MaxFeatureLevel)
	c.featureLevelIs(meta.MaxFeatureLevel)
	c.eventually(t, "every node's coordinator has the group formed before the level rose", func() error {
		for _, id := range c.ids {
			if info, ok := c.nodes[id].b.DescribeGroup("g"); !ok || len(info.Members) != 1 || info.Members[0].MemberID != a.MemberID {
				return fmt.Errorf("n%d describes %+v", id, info)
			}
		}
		return nil
	})
	powerCut()
	if err := heartbeat(a); err != nil {
		t.Fatalf("at level %d, the member's heartbeat after a power cut of its coordinator: %v", meta.MaxFeatureLevel, err)
	}
}

// TestEveryGroupEventHasALevel: every group event type this build writes has the feature
// level that admits it in the metadata log, one this binary reads; membership records
// need LevelGroupMembers, so a cluster below it refuses them before they are proposed.
func TestEveryGroupEventHasALevel(t *testing.T) {
	for _, typ := range group.EventTypes() {
		l, ok := groupEventLevels[typ]
		if !ok || l < meta.LevelBase || l > meta.MaxFeatureLevel {
			t.Errorf("group event type %d: level %d (listed %v)", typ, l, ok)
		}
	}
	members := []group.Event{{Type: group.EventOffsetsCommitted}, {Type: group.EventGroupMembers}}
	if got := groupEventsLevel(members); got != meta.LevelGroupMembers {
		t.Errorf("offsets and a membership record need level %d, want %d", got, meta.LevelGroupMembers)
	}
	if got := groupEventsLevel([]group.Event{{Type: 99}}); got <= meta.MaxFeatureLevel {
		t.Errorf("an unlisted type needs level %d: it could be proposed", got)
	}
}
