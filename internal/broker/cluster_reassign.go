package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Reassigning a partition's replicas (Kafka's AlterPartitionReassignments and
// ListPartitionReassignments) in a cluster: the catalog records the target as a move
// (meta.OpReassign), and the partition's leader drives its Raft group there as it drives
// every move (cluster_moves.go: the new replicas join as learners and are seeded, then one
// joint-consensus change). The replication factor may change with it.

// ErrInvalidReplicaAssignment: a replica list the cluster cannot take (Kafka's
// INVALID_REPLICA_ASSIGNMENT). A partition moving already is not refused: the new
// target replaces the one under way (meta.OpReassign).
var ErrInvalidReplicaAssignment = errors.New("invalid replica assignment")

// ErrNoReassignmentInProgress: a cancel found no reassignment moving the partition or
// queue (Kafka's NO_REASSIGNMENT_IN_PROGRESS); a move for a node's removal or a rebalance
// is not one.
var ErrNoReassignmentInProgress = errors.New("no reassignment in progress")

// Reassignment is a partition whose replicas are moving.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32 // every node that holds it during the move: the target, then the others
	Adding    []int32 // in the target, not among the replicas it had
	Removing  []int32 // among the replicas it had, not in the target
}

// ReassignPartition moves a partition of a catalog topic to the replicas named (the
// first the preferred leader) and returns once the catalog holds the target; the move
// itself runs on. With allowRFChange false a list of another length than the current one is
// refused, as Kafka does (KIP-860). ErrNotClustered on a single node.
func (b *Broker) ReassignPartition(topic string, partition int32, replicas []int32, allowRFChange bool) error {
	c := b.cluster
	if c == nil {
		return ErrNotClustered
	}
	cp, err := c.catalogPartition(topic, partition)
	if err != nil {
		return err
	}
	if !allowRFChange && len(replicas) != len(cp.Replicas) {
		return invalid("replication_factor", "%d replicas for %s/%d, which has %d: a change of replication factor must be allowed (KIP-860)",
			len(replicas), topic, partition, len(cp.Replicas))
	}
	return c.reassign(cp.Group, replicas)
}

// ReassignQueue moves a catalog queue's group to the replicas named (the first the
// preferred leader), its replication factor too: queues have no Kafka API, so this is
// `sluice cluster reassign --queue`. ErrNotClustered on a single node.
func (b *Broker) ReassignQueue(name string, replicas []int32) error {
	c := b.cluster
	if c == nil {
		return ErrNotClustered
	}
	cq, err := c.catalogQueue(name)
	if err != nil {
		return err
	}
	return c.reassign(cq.Group, replicas)
}

// CancelPartitionReassignment stops the reassignment moving a partition of a catalog
// topic: its replicas go back to those it had before (Kafka's AlterPartitionReassignments
// with null replicas), as a move the leader drives like any other; ErrNoReassignmentInProgress
// when none is under way.
func (b *Broker) CancelPartitionReassignment(topic string, partition int32) error {
	c := b.cluster
	if c == nil {
		return ErrNotClustered
	}
	cp, err := c.catalogPartition(topic, partition)
	if err != nil {
		return err
	}
	return c.cancelReassign(cp.Group)
}

// catalogPartition is topic/partition as this node's catalog places it: the topic's
// unknown-topic error, or ErrUnknownPartition.
func (c *clusterRT) catalogPartition(topic string, partition int32) (meta.Partition, error) {
	ct, ok := c.clusteredTopic(topic)
	if !ok {
		return meta.Partition{}, c.unknownTopic(topic)
	}
	if partition < 0 || int(partition) >= len(ct.Partitions) {
		return meta.Partition{}, fmt.Errorf("%w: %s/%d", ErrUnknownPartition, topic, partition)
	}
	return ct.Partitions[partition], nil
}

// CancelQueueReassignment is CancelPartitionReassignment for a catalog queue
// (`sluice cluster reassign --queue NAME --cancel`).
func (b *Broker) CancelQueueReassignment(name string) error {
	c := b.cluster
	if c == nil {
		return ErrNotClustered
	}
	cq, err := c.catalogQueue(name)
	if err != nil {
		return err
	}
	return c.cancelReassign(cq.Group)
}

func (c *clusterRT) cancelReassign(g multiraft.GroupID) error {
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	err := c.cat.CancelReassign(ctx, g)
	if errors.Is(err, meta.ErrNoReassignment) {
		return fmt.Errorf("%w: %v", ErrNoReassignmentInProgress, err)
	}
	if err != nil {
		return c.catalogErr(err)
	}
	c.reconcile()
	c.reconcileQueues()
	return nil
}

// reassign records group g's target replicas in the catalog and reconciles.
func (c *clusterRT) reassign(g multiraft.GroupID, replicas []int32) error {
	reps := make([]multiraft.NodeID, len(replicas))
	for i, r := range replicas {
		if r <= 0 {
			return fmt.Errorf("%w: node %d", ErrInvalidReplicaAssignment, r)
		}
		reps[i] = multiraft.NodeID(r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	err := c.cat.Reassign(ctx, g, reps)
	switch {
	case errors.Is(err, meta.ErrMove): // the group is gone from the catalog meanwhile
		return fmt.Errorf("%w: %v", ErrUnknownPartition, err)
	case errors.Is(err, meta.ErrInvalidNode):
		return fmt.Errorf("%w: %v", ErrInvalidReplicaAssignment, err)
	case err != nil:
		return c.catalogErr(err)
	}
	c.reconcile()
	c.reconcileQueues()
	return nil
}

// ConfirmedPartitionReassignments is PartitionReassignments as Kafka's controller answers
// ListPartitionReassignments: only on the controller (elsewhere a *NotLeaderError of the
// catalog: NOT_CONTROLLER, and the client asks the controller), and after a barrier entry
// proposed once the call began has committed, so that the list holds every reassignment
// acknowledged before it (this node's catalog may lag the cluster's, and a controller cut
// off from the others may have been replaced) and none a completed move ended.
func (b *Broker) ConfirmedPartitionReassignments(ctx context.Context) ([]Reassignment, error) {
	c := b.cluster
	if c == nil {
		return nil, ErrNotClustered
	}
	ctx, cancel := context.WithTimeout(ctx, coordinatorReadyTimeout)
	defer cancel()
	if err := c.cat.ProposeGroupOffsets(ctx, nil); err != nil {
		return nil, c.catalogErr(err)
	}
	return b.PartitionReassignments()
}

// PartitionReassignments lists the partitions moving, as this node's catalog has them
// (a rebalance's and a node removal's moves too), by topic and partition.
func (b *Broker) PartitionReassignments() ([]Reassignment, error) {
	c := b.cluster
	if c == nil {
		return nil, ErrNotClustered
	}
	var out []Reassignment
	for _, g := range c.meta.State().Moving() {
		if g.Topic == "" {
			continue // a queue: Kafka has no word for it
		}
		r := Reassignment{Topic: g.Topic, Partition: int32(g.Index)}
		// Adding and removing are against the replicas before the reassignment, as
		// Kafka's; a move without one (a removal's, a rebalance's) against Old.
		before := g.Original
		if before == nil {
			before = g.Old
		}
		for _, n := range g.Replicas {
			r.Replicas = append(r.Replicas, int32(n))
			if !slices.Contains(before, n) {
				r.Adding = append(r.Adding, int32(n))
			}
		}
		for _, n := range g.Old {
			if !slices.Contains(g.Replicas, n) {
				r.Replicas = append(r.Replicas, int32(n))
			}
		}
		for _, n := range before {
			if !slices.Contains(g.Replicas, n) {
				r.Removing = append(r.Removing, int32(n))
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Reassignment) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}
