package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
)

// TestClusterIdleProducerForgottenOnEveryReplica: in a cluster, an idempotent producer
// idle for producer.id.expiration is forgotten by the leader's forget entry on every
// replica alike (each replica decides duplicates from that state), one that wrote since
// is kept, and the forgotten one's next batch, at any sequence, is stored at the same
// offset everywhere. Below meta.LevelProducerExpiry the entry is refused and nothing is
// forgotten: an older node would stop the group on it.
func TestClusterIdleProducerForgottenOnEveryReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three-node clusters")
	}
	for _, tc := range []struct {
		name   string
		level  int
		forget bool
	}{
		{name: "at the level", level: meta.MaxFeatureLevel, forget: true},
		{name: "below it", level: meta.LevelProducerExpiry - 1, forget: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			c := startMemCluster(&memCluster{t: t, now: clk.Now, advertise: map[multiraft.NodeID]int{3: tc.level}}, 3)
			c.featureLevelIs(tc.level)
			if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "x", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			a, _ := c.nodes[1].b.InitProducerID("")
			b, _ := c.nodes[2].b.InitProducerID("")
			produce := func(pid ProducerID, seq int32) {
				t.Helper()
				for attempt := 0; ; attempt++ {
					l := c.leaderOf("x", 0)
					if l == nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					_, err := l.ProduceBatches(context.Background(), "x", 0, [][]byte{idempotentBatch(t, pid, seq, clk.Now())})
					if err == nil {
						return
					}
					if attempt == 100 {
						t.Fatalf("producer %d sequence %d: %v", pid.ID, seq, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			pass := func() {
				for _, id := range c.ids {
					c.nodes[id].b.Maintain()
				}
			}
			everywhere := func(what string, want ...ProducerID) {
				t.Helper()
				var wanted []int64
				for _, p := range want {
					wanted = append(wanted, p.ID)
				}
				c.eventually(t, what, func() error {
					for _, id := range c.ids {
						ps, err := c.nodes[id].b.PartitionProducers("x", 0)
						if err != nil {
							return err
						}
						var got []int64
						for _, p := range ps {
							got = append(got, p.ID)
						}
						if !slices.Equal(got, wanted) {
							return fmt.Errorf("n%d remembers %v, want %v", id, got, wanted)
						}
						if st := c.nodes[id].b.ProducerStats(); st.Remembered != int64(len(want)) {
							return fmt.Errorf("n%d's ProducerStats says %d remembered, want %d", id, st.Remembered, len(want))
						}
					}
					return nil
				})
			}
			expiredEverywhere := func(want uint64) {
				t.Helper()
				for _, id := range c.ids {
					if got := c.nodes[id].b.ProducerStats().Expired; got != want {
						t.Fatalf("n%d's ProducerStats says %d expired, want %d (a follower counts the forget entries it applies)", id, got, want)
					}
				}
			}
			produce(a, 0)
			produce(b, 0)
			everywhere("both producers on every replica", a, b)
			pass()
			clk.Advance(12 * time.Hour)
			pass()
			produce(b, 1)
			clk.Advance(13 * time.Hour)
			pass()
			if !tc.forget {
				l := c.leaderOf("x", 0)
				err := c.mustPart(l, "x", 0).repl.Load().part.Forget([]replpart.IdleProducer{{ID: a.ID, LastBase: 0}})
				if !errors.Is(err, meta.ErrFeatureLevel) {
					t.Fatalf("a forget entry below the level: %v, want the feature level's refusal", err)
				}
				time.Sleep(200 * time.Millisecond) // a forget entry would apply in milliseconds
				everywhere("below the level, nothing forgotten", a, b)
				expiredEverywhere(0)
				return
			}
			everywhere("a forgotten on every replica, b kept", b)
			expiredEverywhere(1)
			produce(a, 7) // any sequence, once forgotten
			everywhere("a back on every replica", a, b)
			for _, id := range c.ids {
				if c.leaderOf("x", 0) != c.nodes[id].b {
					waitSame(t, c, "x", id) // the same bytes at the same offsets
				}
			}
		})
	}
}
