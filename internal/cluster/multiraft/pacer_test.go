package multiraft_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// paced is a recorder whose snapshots are due only when due is set.
type paced struct {
	*recorder
	due *atomic.Bool
}

func (p paced) SnapshotDue() bool { return p.due.Load() }

// TestSnapshotPacer: a state machine that says its snapshot is not due gets none however
// many entries past SnapshotEntries are applied, and one at the next apply once it is due.
func TestSnapshotPacer(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{SnapshotEntries: 10, DisableQuiesce: true})
	var due atomic.Bool
	for _, id := range c.ids {
		nd := c.nodes[id]
		rec := &recorder{}
		if err := nd.host.CreateGroup(1, c.ids, paced{rec, &due}); err != nil {
			t.Fatal(err)
		}
		nd.sms[1], nd.groups = rec, append(nd.groups, 1)
	}
	_ = c.nodes[1].host.Campaign(1)
	c.settle()
	leader, _ := c.leader(1)
	propose := func(n int) {
		t.Helper()
		for i := range n {
			p, err := c.nodes[leader].host.ProposeAsync(1, []byte(fmt.Sprint(i)))
			if err != nil || !c.await(p, 50) {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
		for range 10 {
			c.tick()
		}
	}
	created := func() (n uint64) {
		for _, id := range c.ids {
			n += c.nodes[id].host.Stats().SnapsCreated
		}
		return n
	}
	before := created()
	propose(35)
	if got := created() - before; got != 0 {
		t.Fatalf("%d snapshots taken while none was due (35 entries, SnapshotEntries 10)", got)
	}
	due.Store(true)
	propose(1)
	if got := created() - before; got != 3 {
		t.Fatalf("%d snapshots once due, want one on each of the 3 nodes", got)
	}
}
