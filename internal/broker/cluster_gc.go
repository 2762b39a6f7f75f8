package broker

import (
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Garbage collection of Raft groups. A topic's or queue's groups are removed by the node
// that hosts them when the catalog deletes the topic or queue (dropTopic,
// reconcileQueues), but only while it hosts them: a node that was down when the delete
// was committed, or crashed between its local delete and the group's removal, reopens
// without them and never opens those groups again, so their logs, snapshots and state
// would stay on its disk for good.
//
// The rule needs no barrier against a catalog that lags the cluster's: group ids are
// handed out in apply from State.NextGroup and never reused (meta.FirstDataGroup), so a
// group id below this node's applied NextGroup that its applied catalog does not name was
// named once and deleted since, which no later entry undoes. A group the host has open is
// left to its owner's own removal. A replica a move took away while this node was down is
// not collected here: the catalog still names its group (docs/cluster.md, "What is not
// replicated yet").

// DefaultCollectEvery is how often the run loop looks for such groups (a listing of the
// Raft directory) unless ClusterOptions.CollectEvery says otherwise; also at its first round.
const DefaultCollectEvery = 5 * time.Minute

// collectGroups removes the groups on this node's disk that the catalog allocated and no
// longer names. Run from the reconcile loop only, which is also what creates groups.
func (c *clusterRT) collectGroups() {
	if c.disk == nil {
		return
	}
	st := c.meta.State()
	named := map[multiraft.GroupID]bool{meta.Group: true}
	for _, t := range st.Topics {
		for _, p := range t.Partitions {
			named[p.Group] = true
		}
	}
	for _, q := range st.Queues {
		named[q.Group] = true
	}
	ids, err := c.disk.GroupIDs()
	if err != nil {
		c.log.Warn("cluster: cannot list the raft groups on disk", "err", err)
		return
	}
	for _, id := range ids {
		if id < meta.FirstDataGroup || id >= st.NextGroup || named[id] {
			continue
		}
		if _, err := c.host.Status(id); err == nil {
			continue // open here: its owner removes it
		}
		if err := c.disk.RemoveGroup(id); err != nil {
			c.log.Warn("cluster: cannot remove the raft group of a deleted topic or queue", "group", id, "err", err)
			continue
		}
		c.log.Info("cluster: removed the raft group of a deleted topic or queue", "group", id, "catalog_index", st.Index)
	}
}
