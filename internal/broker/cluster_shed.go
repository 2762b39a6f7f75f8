package broker

// Leadership off a full disk (docs/cluster.md, "A full disk"). A node whose disk guard is
// in its full state refuses new data for the partitions and queues it leads, so leading
// them it would keep them unwritable while their other replicas have room. Each reconcile
// round it therefore hands the leadership of each, and of the metadata group, to an
// in-sync replica whose node takes leadership (meta.Catalog.NodeRefusesLeadership: a node
// refuses it while its disk is full or while it stops, cluster_handoff.go), and the leader
// balancing (balanceLeaders, balanceQueueLeaders) hands nothing back to a preferred leader
// whose node refuses it. A node that cannot say (unreachable, or a binary from before the
// question) counts as taking it: what every node did before.

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// askRefusesTimeout bounds one "do you take leadership" question to a peer; a peer that
// does not answer in time counts as taking it. A variable so that tests on a loaded
// machine (CI under -race) can wait longer for the answer they check.
var askRefusesTimeout = 500 * time.Millisecond

// refusingNodes returns a function that tells whether a node refuses leadership (its disk
// is full, or it is stopping), asking each node at most once (the answers hold for one
// round of shedding, balancing or handing off).
func (c *clusterRT) refusingNodes() func(multiraft.NodeID) bool {
	answers := map[multiraft.NodeID]bool{}
	return func(n multiraft.NodeID) bool {
		if refuses, ok := answers[n]; ok {
			return refuses
		}
		ctx, cancel := context.WithTimeout(c.bgCtx, askRefusesTimeout)
		defer cancel()
		refuses, err := c.cat.NodeRefusesLeadership(ctx, n)
		answers[n] = err == nil && refuses
		return answers[n]
	}
}

// shedLeadersWhileFull hands the leadership of every partition and queue this node leads
// to a replica with room, while this node's disk is full.
func (c *clusterRT) shedLeadersWhileFull() {
	if c.b.disk.Admit() == nil {
		return
	}
	refuses := c.refusingNodes()
	for _, t := range c.b.streams.topicList() {
		_, parts := t.snapshot()
		for _, p := range parts {
			if h := p.repl.Load(); h != nil {
				c.shedGroup(h.group, refuses, fmt.Sprintf("partition %s/%d", p.topic, p.index))
			}
		}
	}
	for _, h := range c.hostedQueueList() {
		c.shedGroup(h.group, refuses, "queue "+h.name)
	}
	// And the controller: the catalog's changes, every consumer group's offset commits and
	// the transactions' records are the metadata group's entries, which this node would
	// append to a disk with no room left beyond the headroom the guard released (the
	// guard refuses a client's data, not the cluster's own records), then stall the
	// metadata group for the whole cluster until an election moved it.
	c.shedGroup(meta.Group, refuses, "the metadata group (the controller)")
}

// shedGroup transfers group g's leadership, if this node holds it, to its first in-sync
// replica whose node takes it.
func (c *clusterRT) shedGroup(g multiraft.GroupID, refuses func(multiraft.NodeID) bool, what string) {
	st, err := c.host.Status(g)
	if err != nil || st.Role != raft.StateLeader {
		return
	}
	for _, n := range st.InSync {
		if n == c.node || refuses(n) {
			continue
		}
		if err := c.host.TransferLeadership(g, n); err == nil {
			c.log.Warn("cluster: disk full: handing leadership to a node with room", "of", what, "to", uint64(n))
		}
		return
	}
}
