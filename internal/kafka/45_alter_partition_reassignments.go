package kafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleAlterPartitionReassignments answers as a one-node Kafka does: the
// only assignment that exists is this node, so reassigning a partition to
// exactly [this node] succeeds and changes nothing, any other replica set
// is INVALID_REPLICA_ASSIGNMENT (no such broker), and cancelling (null
// replicas) is NO_REASSIGNMENT_IN_PROGRESS. It needs alter on the cluster.
// A cluster node moves replicas (45_alter_partition_reassignments_cluster.go).
func handleAlterPartitionReassignments(_ context.Context, c *conn, req *kmsg.AlterPartitionAssignmentsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if !c.may(auth.Alter, auth.Cluster, "") {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	if c.s.b.Clustered() {
		clusterReassign(c, req, resp)
		return msg(resp)
	}
	node := c.s.cfg.NodeID
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		n, err := c.s.b.PartitionCount(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case err != nil:
				rp.ErrorCode, rp.ErrorMessage = errCode(err, nil), errMessage(err)
			case p.Partition < 0 || p.Partition >= n:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.Replicas == nil:
				rp.ErrorCode = kerr.NoReassignmentInProgress.Code
			case !slices.Equal(p.Replicas, []int32{node}):
				m := fmt.Sprintf("replicas %v: this cluster has one node, %d", p.Replicas, node)
				rp.ErrorCode, rp.ErrorMessage = kerr.InvalidReplicaAssignment.Code, &m
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}

// handleListPartitionReassignments: on one node no reassignment is ever
// in progress, so the list is empty; a cluster node lists the partitions
// moving. It needs describe on the cluster.
func handleListPartitionReassignments(ctx context.Context, c *conn, req *kmsg.ListPartitionReassignmentsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !c.may(auth.Describe, auth.Cluster, "") {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	} else if c.s.b.Clustered() {
		clusterListReassignments(ctx, c, req, resp)
	}
	return msg(resp)
}
