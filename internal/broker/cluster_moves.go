package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// Replica moves (docs/cluster.md, "Membership"). The catalog records a move as intent: a
// group's target Replicas, and Old, the replicas it had (meta/membership.go). Every node
// hosts a group while it is in either; the group's leader drives its configuration to the
// target one step per reconcile round (multiraft.StepMove: learner, caught up, leadership
// away from a leaving leader, promotion and removal through joint consensus), each step
// decided from the group's applied ConfState, so a leader that crashes mid-move is
// replaced by one that carries on. Once the configuration is the target the leader
// records MoveDone and the nodes only in Old stop hosting the group.
//
// The metadata group's leader also proposes the moves of a rebalance (a node joined, so
// counts differ by more than one; at most maxMoves at a time) and keeps the metadata
// group's own membership in step with the catalog's nodes.

// maxMoves bounds the moves a rebalance keeps in flight at once: each costs a snapshot
// sent to a new replica and a few configuration changes.
const maxMoves = 2

// partitionSeeding says a new partition replica can be seeded with the records below
// the leader's snapshot: it can, since its Restore pulls them from a peer (replpart's
// Source, docs/cluster.md "Snapshot, compaction and seeding a replica"), so partitions
// with records move and a rebalance moves them as it moves queues. Kept as a switch:
// false makes a move of a partition with records wait, as before seeding existed.
const partitionSeeding = true

// metaVoters is how many voters the metadata group keeps when it has the members for
// them; the other members follow it as learners.
const metaVoters = 3

// PeerSet is the transport's peer table, which membership changes at run time
// (tcptransport.Transport implements it).
type PeerSet interface {
	SetPeer(id multiraft.NodeID, addr string) error
	RemovePeer(id multiraft.NodeID)
	// PeerAt is the peer dialled at addr, if any (AddNode refuses a second node there).
	PeerAt(addr string) (multiraft.NodeID, bool)
}

// hostsPartition reports whether node n hosts partition cp's group: it is a replica, or
// one still in its configuration while a move is on.
func hostsPartition(cp meta.Partition, n multiraft.NodeID) bool {
	return slices.Contains(cp.Replicas, n) || slices.Contains(cp.Old, n)
}

func hostsQueue(cq *meta.Queue, n multiraft.NodeID) bool {
	return slices.Contains(cq.Replicas, n) || slices.Contains(cq.Old, n)
}

// bootstrapVoters are the voters a group is created with on a node that has no state for
// it: its replicas if they are still its initial ones, none once it moved (a node new to
// the group starts empty and waits for its leader's snapshot; multiraft's blank replica).
func bootstrapVoters(replicas []multiraft.NodeID, moved bool) []multiraft.NodeID {
	if moved {
		return nil
	}
	return replicas
}

// unhostPartition stops hosting a partition's group that moved off this node: its Raft
// storage is deleted. The local log is left as it is (every node keeps every partition's
// directory); if a replica comes back here, its leader's snapshot cuts it back.
func (c *clusterRT) unhostPartition(p *partitionRT) error {
	h := p.repl.Load()
	if h == nil {
		return nil
	}
	if err := c.host.RemoveGroup(h.group); err != nil && !errors.Is(err, multiraft.ErrGroupUnknown) {
		return fmt.Errorf("partition %s/%d: stop hosting group %d: %w", p.topic, p.index, h.group, err)
	}
	p.repl.Store(nil)
	c.log.Info("cluster: a partition's replica moved off this node", "topic", p.topic, "partition", p.index, "group", uint64(h.group))
	return nil
}

// membership is the reconciler's membership round: the transport's peers, the moves this
// node leads, and on the metadata leader the metadata group's members and a rebalance.
// It reports whether a move is in progress (the reconciler then comes back sooner).
func (c *clusterRT) membership() bool {
	st := c.meta.State()
	c.syncPeers(st)
	moving := st.Moving()
	for _, g := range moving {
		c.stepMove(st, g)
	}
	if ms, err := c.host.Membership(meta.Group); err == nil && ms.IsLeader {
		c.metaMembership(st, ms)
		if len(moving) < maxMoves {
			c.rebalance(st)
		}
	}
	return len(moving) > 0
}

// syncPeers makes every node the catalog added a peer of the transport and of the host's
// liveness; a removed node stops being one once no group and no metadata configuration
// names it.
func (c *clusterRT) syncPeers(st *meta.State) {
	for id, addr := range st.Joined {
		if id == c.node || (st.Removed[id] && !c.stillMember(st, id)) {
			continue
		}
		if c.peers != nil {
			if err := c.peers.SetPeer(id, addr); err != nil {
				c.log.Warn("cluster: adding a peer to the transport", "node", uint64(id), "err", err)
			}
		}
		c.host.AddPeer(id)
	}
	for id := range st.Removed {
		if id != c.node && !c.stillMember(st, id) {
			if c.peers != nil {
				c.peers.RemovePeer(id)
			}
			c.host.RemovePeer(id)
		}
	}
}

// stillMember: a removed node some group still places a replica on, or that the metadata
// group still has in its configuration as this node applied it.
func (c *clusterRT) stillMember(st *meta.State, id multiraft.NodeID) bool {
	if st.Holds(id) {
		return true
	}
	ms, err := c.host.Membership(meta.Group)
	return err != nil || slices.Contains(ms.Voters, id) || slices.Contains(ms.Learners, id) || slices.Contains(ms.Outgoing, id)
}

// stepMove takes the next step of group g's move if this node leads the group.
func (c *clusterRT) stepMove(st *meta.State, g meta.GroupPlacement) {
	ms, err := c.host.Membership(g.Group)
	if err != nil || !ms.IsLeader {
		return
	}
	step := multiraft.PlanMove(ms, g.Replicas, c.node)
	if step.Kind == multiraft.MoveChange && step.Changes[0].Kind == multiraft.AddLearner && g.Topic != "" && !partitionSeeding {
		if n := c.partitionRecords(g); n != 0 {
			c.log.Warn("cluster: a partition with records cannot move yet (a new replica cannot be seeded with them): the move waits",
				"partition", g.What(), "high_watermark", n, "to", uint64(step.Changes[0].Node))
			return
		}
	}
	if step.Kind == multiraft.MoveDone {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.cat.MoveDone(ctx, g.Group, g.Replicas); err != nil {
			c.log.Warn("cluster: recording a finished move; retrying", "group", g.What(), "err", err)
			return
		}
		c.log.Info("cluster: replica move done", "group", g.What(), "replicas", fmt.Sprint(g.Replicas))
		return
	}
	if _, err := c.host.StepMove(g.Group, g.Replicas); err != nil {
		c.log.Warn("cluster: replica move step failed; retrying", "group", g.What(), "step", step.String(), "err", err)
		return
	}
	if step.Kind != multiraft.MoveWait {
		c.log.Info("cluster: replica move", "group", g.What(), "step", step.String(), "target", fmt.Sprint(g.Replicas))
	}
}

// partitionRecords is the high watermark of a partition on this node (-1: unknown).
func (c *clusterRT) partitionRecords(g meta.GroupPlacement) int64 {
	_, p, err := c.b.streams.partition(g.Topic, int32(g.Index))
	if err != nil {
		return -1
	}
	return p.log.HighWatermark()
}

// rebalance proposes one move that evens replica counts out, if they differ by more than
// one: what a node that joined gets its replicas by.
func (c *clusterRT) rebalance(st *meta.State) {
	if st == c.balanced {
		return // what Rebalance reads is all in st, which found nothing to move
	}
	movable := func(g meta.GroupPlacement) bool { return g.Queue != "" || partitionSeeding }
	gid, from, to, ok := st.Rebalance(movable)
	if !ok {
		c.balanced = st
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.cat.MoveReplica(ctx, gid, from, to); err != nil {
		c.log.Warn("cluster: proposing a rebalancing move", "group", uint64(gid), "err", err)
		return
	}
	c.log.Info("cluster: rebalancing: moving a replica", "group", uint64(gid), "from", uint64(from), "to", uint64(to))
}

// metaMembership, on the metadata group's leader, takes one step toward its target
// membership: every added node a member (a learner first), min(metaVoters, members) of
// them voters, removed nodes out once no group places a replica on them.
func (c *clusterRT) metaMembership(st *meta.State, ms multiraft.Membership) {
	if ms.Joint() {
		return
	}
	member := func(n multiraft.NodeID) bool { return slices.Contains(ms.Voters, n) || slices.Contains(ms.Learners, n) }
	var change []multiraft.Change
	for _, id := range slices.Sorted(maps.Keys(st.Joined)) {
		if !st.Removed[id] && !member(id) {
			change = []multiraft.Change{{Kind: multiraft.AddLearner, Node: id}}
			break
		}
	}
	caught := func() multiraft.NodeID { // a learner ready to vote
		for _, l := range ms.Learners {
			if !st.Removed[l] && ms.CaughtUp(l, multiraft.CatchUpSlack) {
				return l
			}
		}
		return 0
	}
	if change == nil {
		for _, v := range ms.Voters {
			if !st.Removed[v] || st.Holds(v) {
				continue
			}
			if v == c.node { // leave last: hand the catalog to another voter first
				for _, o := range ms.Voters {
					if o != v && !st.Removed[o] && ms.CaughtUp(o, multiraft.CatchUpSlack) {
						_ = c.host.TransferLeadership(meta.Group, o)
						return
					}
				}
				continue
			}
			change = []multiraft.Change{{Kind: multiraft.RemoveNode, Node: v}}
			if l := caught(); l != 0 { // replace it: one joint change
				change = append(change, multiraft.Change{Kind: multiraft.AddVoter, Node: l})
			}
			break
		}
	}
	if change == nil {
		for _, l := range ms.Learners {
			if st.Removed[l] && !st.Holds(l) {
				change = []multiraft.Change{{Kind: multiraft.RemoveNode, Node: l}}
				break
			}
		}
	}
	if change == nil {
		live := 0
		for _, v := range ms.Voters {
			if !st.Removed[v] {
				live++
			}
		}
		if l := caught(); l != 0 && live < metaVoters {
			change = []multiraft.Change{{Kind: multiraft.AddVoter, Node: l}}
		}
	}
	if change == nil {
		return
	}
	if _, err := c.host.ChangeMembershipAsync(meta.Group, change...); err != nil && !errors.Is(err, multiraft.ErrProposalDropped) {
		c.log.Warn("cluster: changing the metadata group's members", "err", err)
		return
	}
	c.log.Info("cluster: metadata group membership", "step", multiraft.MoveStep{Kind: multiraft.MoveChange, Changes: change}.String())
}

// moveRound is how often the reconciler comes back while a move is in progress.
const moveRound = 200 * time.Millisecond

// balanceQueueLeaders is balanceLeaders for queues: each queue this node leads but does not
// prefer (the catalog's first replica) is handed to its preferred replica once that one is
// alive and caught up, so a node that joined and took a queue's preferred replica in a
// move comes to lead it.
func (c *clusterRT) balanceQueueLeaders() {
	st := c.meta.State()
	hosted := c.hostedQueueList()
	refuses := c.refusingNodes() // asked only of a preferred leader about to be handed one
	for _, h := range hosted {
		cq := st.Queues[h.name]
		if cq == nil || cq.Group != h.group || cq.Old != nil || len(cq.Replicas) == 0 || cq.Replicas[0] == c.node {
			continue
		}
		gs, err := c.host.Status(h.group)
		if err != nil || gs.Role != raft.StateLeader || !slices.Contains(gs.InSync, cq.Replicas[0]) || refuses(cq.Replicas[0]) {
			continue
		}
		if err := c.host.TransferLeadership(h.group, cq.Replicas[0]); err == nil {
			c.log.Info("cluster: handing a queue back to its preferred leader", "queue", h.name, "to", uint64(cq.Replicas[0]))
		}
	}
}
