package multiraft_test

import (
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// limited is a recorder that caps log compaction (multiraft.CompactionLimiter).
type limited struct {
	*recorder
	limit uint64
}

func (l limited) CompactLimit() uint64 { return l.limit }

// TestCompactionLimiter: a follower cut off while the leader applies 100 entries (a
// snapshot every 10) is sent a snapshot when the state machine lets the host compact, and
// catches up from the log alone when its CompactLimit is 0. With a limit of 30 the leader's
// log keeps every entry after 30 and nothing before it (so the follower, which lacks
// entries from 2, needs a snapshot again).
func TestCompactionLimiter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limit     *uint64 // nil: no limiter
		wantSnaps bool
		wantFirst uint64 // the leader's first log index afterwards (0: unchecked)
	}{
		{name: "none", wantSnaps: true},
		{name: "never", limit: ptr[uint64](0), wantFirst: 2},
		{name: "at30", limit: ptr[uint64](30), wantSnaps: true, wantFirst: 31}, // cut off since entry 2
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1, 3, multiraft.Config{SnapshotEntries: 10, DisableQuiesce: true})
			engs := map[multiraft.NodeID]*multiraft.MemEngine{}
			for _, id := range c.ids {
				nd := c.nodes[id]
				rec := &recorder{}
				var sm multiraft.StateMachine = rec
				if tc.limit != nil {
					sm = limited{rec, *tc.limit}
				}
				if err := nd.host.CreateGroup(1, c.ids, sm); err != nil {
					t.Fatal(err)
				}
				nd.sms[1], nd.groups = rec, append(nd.groups, 1)
				engs[id] = nd.disk.(*memDisk).eng
			}
			_ = c.nodes[1].host.Campaign(1)
			c.settle()
			c.net.Partition([]multiraft.NodeID{1, 2}, []multiraft.NodeID{3})
			for i := range 100 {
				p, err := c.nodes[1].host.ProposeAsync(1, []byte(fmt.Sprint(i)))
				if err != nil {
					t.Fatal(err)
				}
				if !c.await(p, 50) {
					t.Fatalf("entry %d not applied", i)
				}
			}
			c.net.Heal()
			for range 200 {
				if len(c.nodes[3].sms[1].entries()) == len(c.nodes[1].sms[1].entries()) {
					break
				}
				c.tick()
			}
			if got, want := len(c.nodes[3].sms[1].entries()), len(c.nodes[1].sms[1].entries()); got != want {
				t.Fatalf("follower applied %d entries, leader %d", got, want)
			}
			if sent := c.nodes[1].host.Stats().SnapsSent; (sent > 0) != tc.wantSnaps {
				t.Fatalf("leader sent %d snapshots, want any: %v", sent, tc.wantSnaps)
			}
			if tc.wantFirst != 0 {
				st, _ := engs[1].Group(1)
				if first, _ := st.FirstIndex(); first != tc.wantFirst {
					t.Fatalf("leader's first log index %d, want %d", first, tc.wantFirst)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
