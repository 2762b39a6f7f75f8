package broker

// A broker in a cluster (Options.Cluster; docs/cluster.md, "The broker in a cluster").
//
// The catalog of topics is the metadata Raft group's (internal/cluster/meta): a topic is
// created, changed and deleted there, and every node's reconciler (cluster_reconcile.go)
// makes its local broker match it — every node holds every topic's settings, and the
// nodes a partition is placed on host its Raft group (internal/cluster/replpart). A
// produce on the partition's leader is proposed to that group and answered once committed
// (a quorum fsynced it); apply appends the batches to each replica's local partition log
// without an fsync (cluster_replica.go), so the Raft log is what is durable and the local
// log is cut back to its last checkpoint and re-applied after a crash. Fetches are served
// by the leader from its local log, which holds only committed records.
//
// Consumer groups are coordinated by the controller, their committed offsets replicated
// through the metadata group (cluster_groups.go); so are Kafka transactions, whose markers
// each partition's leader writes on the coordinator's request (cluster_txn*.go). Queues are replicated in groups of their
// own (cluster_queues*.go), a topic's subscriptions in their partitions' groups
// (cluster_subs*.go).

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// ClusterOptions put a broker in a cluster; the node assembles them
// (internal/node/cluster.go) and runs the host.
type ClusterOptions struct {
	Host    *multiraft.Host
	Meta    *meta.Machine // the metadata group's state machine on this node
	Catalog *meta.Catalog // proposes to the metadata group
	// Peers, when set, is the transport's peer table: nodes added to the cluster are
	// made peers, removed ones stop being (cluster_moves.go).
	Peers PeerSet
	// Addr is this node's own --cluster-addr ("" unknown): AddNode refuses another node
	// there.
	Addr string
	// Disk, when set, is the Raft engine's storage, for removing the groups of deleted
	// topics and queues that this node no longer opens (cluster_gc.go).
	Disk GroupDisk
	// CollectEvery is how often those groups are looked for (0: DefaultCollectEvery).
	CollectEvery time.Duration
	// LeaderBalanceEvery is how often this node hands the partitions and queues it leads
	// back to their preferred leaders (0: every 10 s; negative: never, then only
	// ElectPreferredLeader does), as Kafka's auto.leader.rebalance.enable and
	// leader.imbalance.check.interval.seconds.
	LeaderBalanceEvery time.Duration
}

// GroupDisk lists and removes the Raft groups stored on this node (the engine).
type GroupDisk interface {
	GroupIDs() ([]multiraft.GroupID, error)
	RemoveGroup(multiraft.GroupID) error
}

// ErrReplicationUnknown: a replicated write may or may not have been committed (this node
// lost sight of it, or the call's time ran out). Kafka answers REQUEST_TIMED_OUT, as for an
// acks=all produce that timed out: the producer retries, and an idempotent one is
// deduplicated.
var ErrReplicationUnknown = errors.New("the write may or may not have been replicated")

// ErrNotClustered: a cluster call made to a single node.
var ErrNotClustered = errors.New("this node is not part of a cluster (start it with --node-id)")

// ErrNotLeader is matched (errors.Is) by every *NotLeaderError.
var ErrNotLeader = errors.New("not the leader")

// NotLeaderError: this node does not lead what the call needs — a partition's Raft group
// (Kafka NOT_LEADER_OR_FOLLOWER) or the metadata group for a catalog change (Kafka
// NOT_CONTROLLER). Leader is the node believed to lead it, 0 when unknown (an election is
// on): clients refresh their metadata and retry there.
type NotLeaderError struct {
	What    string // "topic/partition" or "the catalog"
	Catalog bool   // the metadata group: Kafka's NOT_CONTROLLER
	Leader  int32
	// Why, when set, says why nothing can be done here now instead of naming a leader
	// (the nodes have not all registered yet): a refusal to retry all the same.
	Why string
}

func (e *NotLeaderError) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("%s cannot take this now: %s", e.What, e.Why)
	}
	if e.Leader == 0 {
		return fmt.Sprintf("this node does not lead %s and no leader is known (an election is under way)", e.What)
	}
	return fmt.Sprintf("this node does not lead %s: node %d does", e.What, e.Leader)
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Clustered reports whether the broker runs in a cluster.
func (b *Broker) Clustered() bool { return b.cluster != nil }

// NodeID is this node's id in the cluster; 0 for a single node.
func (b *Broker) NodeID() int32 {
	if b.cluster == nil {
		return 0
	}
	return int32(b.cluster.node)
}

// ClusterNode is one node of the cluster as clients are told of it.
type ClusterNode struct {
	ID        int32
	KafkaAddr string // host:port, "" when the node has not registered one
	HTTPAddr  string
	SQSAddr   string
	// The TLS listeners' addresses, as the node said when asked (cluster_listeners.go):
	// "" when it has none, or has not been asked yet.
	KafkaTLSAddr string `json:",omitempty"`
	HTTPTLSAddr  string `json:",omitempty"`
	SQSTLSAddr   string `json:",omitempty"`
}

// ClusterNodes lists the nodes the catalog knows, sorted by id; nil for a single node.
func (b *Broker) ClusterNodes() []ClusterNode {
	if b.cluster == nil {
		return nil
	}
	st := b.cluster.meta.State()
	out := make([]ClusterNode, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		if !st.Listed(n.ID) { // removed, its moves done (cluster_moves.go)
			continue
		}
		l := b.cluster.listeners.of(n.ID)
		if n.ID == b.cluster.node {
			l = b.cluster.meta.Listeners()
		}
		out = append(out, ClusterNode{ID: int32(n.ID), KafkaAddr: n.KafkaAddr, HTTPAddr: n.HTTPAddr, SQSAddr: n.SQSAddr,
			KafkaTLSAddr: l.KafkaTLS, HTTPTLSAddr: l.HTTPTLS, SQSTLSAddr: l.SQSTLS})
	}
	return out
}

// Controller is the node leading the metadata group (Kafka's controller), 0 if unknown;
// for a single node, 0 as well (the front-end answers with its own id).
func (b *Broker) Controller() int32 {
	if b.cluster == nil {
		return 0
	}
	return int32(b.cluster.cat.Leader())
}

// Placement is where a partition lives.
type Placement struct {
	Leader   int32 // 0: no leader known (Kafka's -1, LEADER_NOT_AVAILABLE)
	Epoch    int32 // the leader's Raft term: Kafka's leader epoch
	Replicas []int32
	// InSync are the replicas counted in sync: the voters of the group as this node sees
	// it (the leader's view when it leads; progress-based ISR is not built).
	InSync []int32
}

// PartitionPlacement says where topic/partition lives. For a single node it is this
// node (id 0 stands for "me") at epoch 0. A partition this node does not host is
// described from the catalog alone: its preferred leader, which may be stale after a
// failover (the client then meets NOT_LEADER_OR_FOLLOWER and asks again).
func (b *Broker) PartitionPlacement(topic string, partition int32) (Placement, error) {
	_, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return Placement{}, err
	}
	if b.cluster == nil {
		return Placement{Replicas: []int32{0}, InSync: []int32{0}}, nil
	}
	return b.cluster.placement(topic, p), nil
}

// health is the Raft host's part of /readyz: a host stopped by a storage error replicates
// nothing until the node restarts, and one stalled on a full disk (multiraft's
// diskfull.go) acknowledges nothing until there is room. The second is also the disk
// guard's full state, which maintenance may leave a moment before the host's retry.
func (c *clusterRT) health() error {
	if err := c.host.Err(); err != nil {
		return fmt.Errorf("cluster: the Raft host stopped on a storage error; restart this node: %w", err)
	}
	if c.host.DiskFull() != nil {
		return errors.New("cluster: storage full: this node's Raft groups wait for room to write their logs")
	}
	// A node that is not (or no longer) part of the cluster answers from an empty or
	// stale catalog (a queue that exists is QUEUE_NOT_FOUND there): a load balancer should
	// send nothing to it. Not "no leader known": a node bootstrapping with its peers still
	// starting is ready, or nodes started one at a time, each waiting for the last to be
	// ready (a Kubernetes StatefulSet's OrderedReady), would wait for ever.
	if ms, err := c.host.Status(meta.Group); err == nil && ms.Blank {
		return errors.New("cluster: this node has no catalog yet: it waits to be added to the cluster (sluice cluster add-node on a member)")
	}
	if c.meta.State().Removed[c.node] {
		// Its replicas move off meanwhile (its Raft groups go on); clients go elsewhere.
		return errors.New("cluster: this node was removed from the cluster; stop it once its replicas have moved (sluice cluster status)")
	}
	return nil
}
