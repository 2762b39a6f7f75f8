package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// storedCheckpoint is the checkpoint in node id's stored snapshot of topic's partition 0,
// which has no subscription (its snapshot is a version byte, then the checkpoint).
func (c *memCluster) storedCheckpoint(id multiraft.NodeID, topic string) ([]byte, uint64, error) {
	nd := c.nodes[id]
	_, p, err := nd.b.streams.partition(topic, 0)
	if err != nil {
		return nil, 0, err
	}
	h := p.repl.Load()
	if h == nil {
		return nil, 0, fmt.Errorf("n%d does not host %s/0", id, topic)
	}
	st, err := nd.eng.Group(h.group)
	if err != nil {
		return nil, 0, err
	}
	snap, err := st.Snapshot()
	if err != nil || len(snap.Data) == 0 {
		return nil, snap.Metadata.Index, err
	}
	return snap.Data[1:], snap.Metadata.Index, nil
}

// TestClusterIdlePartitionCheckpointsWithStateOnceTheLevelAdmits: a partition written to
// while the cluster is below meta.LevelPartitionState has 16-byte checkpoints (offsets
// only) on every replica. Once the level rises, with nothing written to it, every replica
// stores a checkpoint with the producer and transaction state (an empty entry it applies
// and checkpoints after), and a replica restarted then restores that state rather than
// rebuild it by the scan: without it an idle partition kept its old checkpoint and every
// restart scanned (TestReplicaRestoredDecidesAsTheOthers says what that cost). A partition
// made at the level never needs the empty entry.
func TestClusterIdlePartitionCheckpointsWithStateOnceTheLevelAdmits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	below := meta.LevelPartitionState - 1
	c := startMemCluster(&memCluster{t: t, advertise: map[multiraft.NodeID]int{3: below}}, 3)
	c.featureLevelIs(below)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "idle", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("idle", "a", 40) // past a snapshot (every 25 entries)
	withState := func(cp []byte) bool { return len(cp) > 16 && cp[16] == checkpointStateTag }
	snapAt := map[multiraft.NodeID]uint64{}
	c.eventually(t, "a checkpoint of offsets only on every replica", func() error {
		for _, id := range c.ids {
			cp, index, err := c.storedCheckpoint(id, "idle")
			if err != nil || len(cp) != 16 {
				return fmt.Errorf("n%d: checkpoint %x at %d (%v)", id, cp, index, err)
			}
			if c.mustPart(c.nodes[id].b, "idle", 0).repl.Load().log.CheckpointOutdated() {
				return fmt.Errorf("n%d says its checkpoint is outdated below the level", id)
			}
			snapAt[id] = index
		}
		return nil
	})

	c.nodes[3].b.cluster.meta.AdvertiseFeatureLevel(meta.MaxFeatureLevel)
	c.featureLevelIs(meta.MaxFeatureLevel)
	c.eventually(t, "every replica's stored checkpoint carries the state", func() error {
		for _, id := range c.ids {
			cp, index, err := c.storedCheckpoint(id, "idle")
			if err != nil || !withState(cp) || index <= snapAt[id] {
				return fmt.Errorf("n%d: checkpoint %x at %d, before %d (%v)", id, cp, index, snapAt[id], err)
			}
		}
		return nil
	})
	for _, id := range c.ids {
		c.crash(id, true)
		c.start(id)
		c.eventually(t, fmt.Sprintf("n%d hosts the partition again, restored without a scan", id), func() error {
			h := c.mustPart(c.nodes[id].b, "idle", 0).repl.Load()
			if h == nil {
				return fmt.Errorf("not yet")
			}
			if n := h.log.scans.Load(); n != 0 {
				t.Fatalf("n%d restored its checkpoint by the scan", id)
			}
			return nil
		})
	}

	// A partition made at the level never needs the empty entry, nor a snapshot before its
	// time: its first checkpoint (the empty log's) has no state to lack.
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "new", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	bootstrap := map[multiraft.NodeID]uint64{}
	c.eventually(t, "every node hosts the new partition", func() error {
		for _, id := range c.ids {
			_, index, err := c.storedCheckpoint(id, "new")
			if err != nil {
				return err
			}
			bootstrap[id] = index
		}
		return nil
	})
	c.produceTo("new", "b", 5)
	c.eventually(t, "every replica has the 5 records", func() error {
		for _, id := range c.ids {
			if hw := c.mustPart(c.nodes[id].b, "new", 0).log.HighWatermark(); hw != 5 {
				return fmt.Errorf("n%d at %d", id, hw)
			}
		}
		return nil
	})
	for _, id := range c.ids {
		h := c.mustPart(c.nodes[id].b, "new", 0).repl.Load()
		_, index, err := c.storedCheckpoint(id, "new")
		if err != nil || index != bootstrap[id] || h.log.CheckpointOutdated() || h.log.refreshAsked.Load() != 0 {
			t.Errorf("n%d: snapshot at %d after 5 entries (bootstrap %d, %v), outdated %v, refresh asked %v", id,
				index, bootstrap[id], err, h.log.CheckpointOutdated(), h.log.refreshAsked.Load() != 0)
		}
	}
}

// TestChooseRefreshesPacesAndLeavesFollowersToTheirLeader: refreshCheckpoints asks for at
// most refreshAsksPerRound entries a round, leaders first (a follower is only marked the
// first time: its leader's entry serves it), and none again within refreshAskEvery.
func TestChooseRefreshesPacesAndLeavesFollowersToTheirLeader(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	for _, tc := range []struct {
		name  string
		leads []bool  // per candidate, group i+1
		asked []int64 // refreshAsked before (0: never)
		limit int
		want  []multiraft.GroupID
		mark  []bool // refreshAsked is now afterwards
	}{
		{name: "leaders never asked, within the limit",
			leads: []bool{true, true, true}, asked: []int64{0, 0, 0}, limit: 5,
			want: []multiraft.GroupID{1, 2, 3}, mark: []bool{true, true, true}},
		{name: "the limit leaves the rest to the next round, unmarked",
			leads: []bool{true, true, true, true}, asked: []int64{0, 0, 0, 0}, limit: 2,
			want: []multiraft.GroupID{1, 2}, mark: []bool{true, true, false, false}},
		{name: "asked lately: not again; asked long ago: again",
			leads: []bool{true, true}, asked: []int64{ago(10 * time.Second), ago(refreshAskEvery)}, limit: 5,
			want: []multiraft.GroupID{2}, mark: []bool{false, true}},
		{name: "a follower first seen is only marked, and asks once its leader's entry did not serve it",
			leads: []bool{false, false, false}, asked: []int64{0, ago(time.Second), ago(refreshAskEvery + time.Second)}, limit: 5,
			want: []multiraft.GroupID{3}, mark: []bool{true, false, true}},
		{name: "followers marked do not count against the limit",
			leads: []bool{false, true, false, true}, asked: []int64{0, 0, 0, 0}, limit: 1,
			want: []multiraft.GroupID{2}, mark: []bool{true, true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cands []refreshCandidate
			for i, leads := range tc.leads {
				r := &replicaLog{}
				r.refreshAsked.Store(tc.asked[i])
				cands = append(cands, refreshCandidate{log: r, group: multiraft.GroupID(i + 1), leads: leads})
			}
			got := chooseRefreshes(cands, now, tc.limit)
			if !slices.Equal(got, tc.want) {
				t.Errorf("asked for %v, want %v", got, tc.want)
			}
			for i, r := range cands {
				if marked := r.log.refreshAsked.Load() == now.UnixNano(); marked != tc.mark[i] {
					t.Errorf("group %d: marked asked now %v, want %v", i+1, marked, tc.mark[i])
				}
			}
		})
	}
}
