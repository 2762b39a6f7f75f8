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
// left to its owner's own removal.
//
// A replica a move took off this node (while it was down, or while the group was not
// open here) is collected too: a group the applied catalog places wholly elsewhere
// (neither in Replicas nor, during a move, in Old). That also needs no barrier: a move
// is recorded done (Old cleared) only once its leader applied the Raft configuration
// without this node (PlanMove's MoveDone), so such a replica is no voter of its group
// and nothing counts on what it holds; a catalog that lags can only still place the
// group here, which keeps it — once the metadata replica has applied what it had
// committed (collectGroups says why). A later move back creates the replica anew from a
// snapshot (it refuses votes while blank), as on any node that never held it.

// DefaultCollectEvery is how often the run loop looks for such groups (a listing of the
// Raft directory) unless ClusterOptions.CollectEvery says otherwise; also at its first round.
const DefaultCollectEvery = 5 * time.Minute

// collectGroups removes the groups on this node's disk that the catalog allocated and no
// longer names or places here. Run from the reconcile loop only, which is also what creates groups.
func (c *clusterRT) collectGroups() {
	if c.disk == nil {
		return
	}
	// Placements change both ways (a group moved off and back), so a moved-away replica is
	// collected only once the metadata replica has applied everything it knows committed:
	// at a start, before it re-applied its own log, the catalog could be older than the
	// one under which this node hosted a group that moved back, and voted in it. Status
	// first, State after: the state read is then at least that far.
	ms, err := c.host.Status(meta.Group)
	caughtUp := err == nil && ms.Applied >= ms.Commit
	st := c.meta.State()
	// hostsHere: every group the catalog names → whether to keep it here (it places a
	// replica here, in Replicas or, during a move, in Old; or the catalog may be behind).
	hostsHere := map[multiraft.GroupID]bool{meta.Group: true}
	for _, g := range st.Groups() {
		hostsHere[g.Group] = g.Hosts(c.node) || !caughtUp
	}
	ids, err := c.disk.GroupIDs()
	if err != nil {
		c.log.Warn("cluster: cannot list the raft groups on disk", "err", err)
		return
	}
	for _, id := range ids {
		if id < meta.FirstDataGroup || id >= st.NextGroup || hostsHere[id] {
			continue
		}
		if _, err := c.host.Status(id); err == nil {
			continue // open here: its owner removes it
		}
		if err := c.disk.RemoveGroup(id); err != nil {
			c.log.Warn("cluster: cannot remove a raft group no longer placed here", "group", id, "err", err)
			continue
		}
		why := "its topic or queue was deleted"
		if _, ok := hostsHere[id]; ok {
			why = "its replica moved to other nodes"
		}
		c.log.Info("cluster: removed a raft group no longer placed here", "group", id, "why", why, "catalog_index", st.Index)
	}
}
