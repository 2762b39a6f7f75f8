package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// On a cluster node AlterPartitionReassignments moves partitions' replicas
// (broker.ReassignPartition: the catalog records the target, the partition's
// leader moves its Raft group there) and ListPartitionReassignments lists
// the partitions moving, on the controller only (NOT_CONTROLLER elsewhere, as
// Kafka's brokers answer), after a barrier: every move acknowledged before
// the request is listed. A partition already moving gets the new target
// instead, as in Kafka (KIP-455); cancelling (null replicas) sends a
// reassignment under way back to the replicas it had before it
// (NO_REASSIGNMENT_IN_PROGRESS when none is: a move for a node's removal or
// a rebalance is not one). Version 0 requests may change the replication factor, as in Kafka.

func clusterReassign(c *conn, req *kmsg.AlterPartitionAssignmentsRequest, resp *kmsg.AlterPartitionAssignmentsResponse) {
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			var err error
			if p.Replicas == nil {
				err = c.s.b.CancelPartitionReassignment(t.Topic, p.Partition)
			} else {
				err = c.s.b.ReassignPartition(t.Topic, p.Partition, p.Replicas, allowRF)
			}
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = reassignErrCode(err), errMessage(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

func reassignErrCode(err error) int16 {
	var ia *broker.InvalidArgumentError
	switch {
	case errors.Is(err, broker.ErrNoReassignmentInProgress):
		return kerr.NoReassignmentInProgress.Code
	case errors.Is(err, broker.ErrInvalidReplicaAssignment):
		return kerr.InvalidReplicaAssignment.Code
	case errors.As(err, &ia) && ia.Field == "replication_factor":
		return kerr.InvalidReplicationFactor.Code
	}
	return errCode(err, kerr.InvalidReplicaAssignment)
}

func clusterListReassignments(ctx context.Context, c *conn, req *kmsg.ListPartitionReassignmentsRequest, resp *kmsg.ListPartitionReassignmentsResponse) {
	rs, err := c.s.b.ConfirmedPartitionReassignments(ctx)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err, nil), errMessage(err)
		return
	}
	var want map[string]map[int32]bool // nil: every partition moving
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			want[t.Topic] = map[int32]bool{}
			for _, p := range t.Partitions {
				want[t.Topic][p] = true
			}
		}
	}
	for _, r := range rs {
		if want != nil && !want[r.Topic][r.Partition] {
			continue
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != r.Topic {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = r.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = r.Partition, r.Replicas, r.Adding, r.Removing
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
}
