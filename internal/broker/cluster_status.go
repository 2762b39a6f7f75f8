package broker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// ClusterStatus is a node's view of the cluster, for operators (`sluice cluster status`).
type ClusterStatus struct {
	Node       int32               `json:"node"`
	Controller int32               `json:"controller"` // 0: none known
	Nodes      []ClusterNodeState  `json:"nodes"`
	Partitions []ReplicaState      `json:"partitions"` // the partitions this node hosts
	Queues     []QueueReplicaState `json:"queues"`     // the queues this node hosts (cluster_queues_host.go)
	Membership MembershipState     `json:"membership"` // cluster_members.go
	// FeatureLevel is the catalog's (meta/features.go); ReadsFeatureLevel the level this
	// node tells the controller it reads (its binary's, or --cluster-max-feature-level).
	FeatureLevel      int `json:"feature_level"`
	ReadsFeatureLevel int `json:"reads_feature_level"`
	// FeatureLevelHeldBy, on the controller, are the members that read less than its
	// binary, as its last round of questions found them: what an upgrade still has to do.
	FeatureLevelHeldBy []string `json:"feature_level_held_by,omitempty"`
}

// ClusterNodeState is one node as this node sees it.
type ClusterNodeState struct {
	ClusterNode
	Alive bool `json:"alive"` // heard from within the node timeout (this node: true)
}

// ReplicaState is one hosted partition's Raft group on this node.
type ReplicaState struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Group     uint64  `json:"group"`
	Leader    int32   `json:"leader"` // 0: none known
	Term      uint64  `json:"term"`
	Replicas  []int32 `json:"replicas"`
	InSync    []int32 `json:"in_sync,omitempty"`  // known on the leader only
	Learners  []int32 `json:"learners,omitempty"` // non-voting replicas catching up (a move)
	Commit    uint64  `json:"commit"`
	Applied   uint64  `json:"applied"`
	Quiesced  bool    `json:"quiesced"`
	// Preferred is the preferred leader (the catalog's first replica) and Pinned whether
	// an operator placed the replicas (a reassignment: the rebalance leaves them).
	Preferred int32 `json:"preferred"`
	Pinned    bool  `json:"pinned,omitempty"`
}

// ClusterStatus describes the cluster as this node sees it; ErrNotClustered on a single
// node.
func (b *Broker) ClusterStatus() (ClusterStatus, error) {
	c := b.cluster
	if c == nil {
		return ClusterStatus{}, ErrNotClustered
	}
	out := ClusterStatus{Node: int32(c.node), Controller: int32(c.cat.Leader()), Nodes: []ClusterNodeState{}, Partitions: []ReplicaState{}}
	for _, n := range b.ClusterNodes() {
		out.Nodes = append(out.Nodes, ClusterNodeState{ClusterNode: n, Alive: c.host.PeerAlive(multiraft.NodeID(n.ID))})
	}
	cat := c.meta.State()
	for _, t := range b.streams.topicList() {
		_, parts := t.snapshot()
		for _, p := range parts {
			h := p.repl.Load()
			if h == nil {
				continue
			}
			st, err := c.host.Status(h.group)
			if err != nil {
				continue
			}
			ps := ReplicaState{Topic: p.topic, Partition: p.index, Group: uint64(h.group), Leader: int32(st.Leader),
				Term: st.Term, Commit: st.Commit, Applied: st.Applied, Quiesced: st.Quiesced}
			if ct := cat.Topics[p.topic]; ct != nil && int(p.index) < len(ct.Partitions) {
				if cp := ct.Partitions[p.index]; len(cp.Replicas) > 0 {
					ps.Preferred, ps.Pinned = int32(cp.Replicas[0]), cp.Pinned
				}
			}
			for _, r := range h.replicas {
				ps.Replicas = append(ps.Replicas, int32(r))
			}
			for _, r := range st.InSync {
				ps.InSync = append(ps.InSync, int32(r))
			}
			for _, r := range st.Learners {
				ps.Learners = append(ps.Learners, int32(r))
			}
			out.Partitions = append(out.Partitions, ps)
		}
	}
	out.Queues = c.queueReplicas()
	out.Membership = c.membershipState()
	out.FeatureLevel, out.ReadsFeatureLevel = cat.FeatureLevel(), c.meta.AdvertisedFeatureLevel()
	if held := c.featureBehind.Load(); held != nil && c.cat.Leader() == c.node {
		out.FeatureLevelHeldBy = *held
	}
	slices.SortFunc(out.Partitions, func(a, b ReplicaState) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// TransferLeader asks the leader of topic/partition (this node) to hand leadership to
// node to, a replica in sync. It returns once raft started the transfer; Status shows
// when it is done (raft gives up after an election timeout).
func (b *Broker) TransferLeader(topic string, partition, to int32) error {
	c := b.cluster
	if c == nil {
		return ErrNotClustered
	}
	_, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return err
	}
	h := p.repl.Load()
	if h == nil {
		return c.notLeader(p, 0)
	}
	st, err := c.host.Status(h.group)
	if err != nil {
		return err
	}
	if st.Role != raft.StateLeader {
		return c.notLeader(p, int32(st.Leader))
	}
	if !slices.Contains(st.InSync, multiraft.NodeID(to)) {
		return invalid("target node", "node %d is not an in-sync replica of %s/%d (in sync: %v)", to, topic, partition, st.InSync)
	}
	if int32(c.node) == to {
		return nil
	}
	if err := c.host.TransferLeadership(h.group, multiraft.NodeID(to)); err != nil {
		return fmt.Errorf("transfer %s/%d: %w", topic, partition, err)
	}
	return nil
}

// RaftStats is the node's Raft host's counters and state (multiraft.Stats), for
// /metrics; false outside a cluster.
// refusalCounter is a transport that counts the connections it refused (tcptransport's).
type refusalCounter interface{ RefusedTotal() uint64 }

// TransportRefused is how many connections this node's cluster transport refused (0: a
// single node, or a transport that does not count them).
func (b *Broker) TransportRefused() uint64 {
	if b.cluster == nil {
		return 0
	}
	if rc, ok := b.cluster.peers.(refusalCounter); ok {
		return rc.RefusedTotal()
	}
	return 0
}

func (b *Broker) RaftStats() (multiraft.Stats, bool) {
	if b.cluster == nil {
		return multiraft.Stats{}, false
	}
	return b.cluster.host.Stats(), true
}
