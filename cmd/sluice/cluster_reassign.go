package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/node"
)

func clusterReassignCmd(f *clientFlags) *cobra.Command {
	var queue, replicas string
	var wait time.Duration
	var cancelMove bool
	cmd := &cobra.Command{
		Use:   "reassign (TOPIC PARTITION | --queue NAME) (--replicas ID,ID,... | --cancel)",
		Short: "Move a partition's or a queue's replicas, its replication factor too",
		Long: `Give TOPIC's PARTITION, or queue --queue, the replicas --replicas (node ids, the
first the preferred leader): any member nodes, as many as wanted (the replication
factor changes with it). The catalog records the target and the group's leader moves
it (new replicas as learners, seeded and caught up, then one joint-consensus change).
The command waits, up to --wait, until the move is done. A group moving already gets
the new target instead (a move stuck on a node that is down can be redirected), and
a reassigned group is pinned: the replica rebalance leaves it where it was put.
--cancel instead of --replicas sends a reassignment under way back to the replicas
the group had before it (a move for a node's removal or a rebalance is not one).
Kafka's own tools (kafka-reassign-partitions.sh, --cancel too) do the same for
partitions (docs/cluster.md, "Reassign a partition").`,
		Args: cobra.RangeArgs(0, 2),
	}
	cmd.Flags().StringVar(&queue, "queue", "", "the `queue` to move (instead of TOPIC PARTITION)")
	cmd.Flags().StringVar(&replicas, "replicas", "", "the node `ids` to hold it, comma-separated, the preferred leader first")
	cmd.Flags().BoolVar(&cancelMove, "cancel", false, "cancel the reassignment under way: back to the replicas it had")
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the move (0: do not wait)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, args []string) error {
		req, what, err := reassignRequest(args, queue, replicas, cancelMove)
		if err != nil {
			return err
		}
		if err := adminCall(ctx, f, f.server, "POST", node.ClusterReassignPath, req, nil); err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		target := "nodes " + ids(req.Replicas)
		if req.Cancel {
			target = "the replicas it had before the reassignment"
		}
		fmt.Fprintf(out, "%s moving to %s\n", what, target)
		deadline := time.Now().Add(wait)
		for wait > 0 {
			var st broker.ClusterStatus
			if err := adminCall(ctx, f, f.server, "GET", node.ClusterPath, nil, &st); err != nil {
				return err
			}
			moving := false
			for _, mv := range st.Membership.Moves {
				moving = moving || mv.What == what
			}
			if !moving {
				fmt.Fprintf(out, "%s is on %s\n", what, target)
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s still moving after %s: \"sluice cluster status\" shows it", what, wait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		return nil
	})
	return cmd
}

// reassignRequest reads the command's arguments; what names the group as cluster status
// lists its move ("topic/partition" or "queue NAME").
func reassignRequest(args []string, queue, replicas string, cancel bool) (node.ReassignRequest, string, error) {
	req := node.ReassignRequest{Cancel: cancel}
	if cancel != (replicas == "") {
		return req, "", errors.New("give --replicas, or --cancel, not both")
	}
	for _, s := range strings.Split(replicas, ",") {
		if cancel {
			break
		}
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || id <= 0 {
			return req, "", fmt.Errorf("--replicas: want node ids separated by commas, got %q", replicas)
		}
		req.Replicas = append(req.Replicas, int32(id))
	}
	switch {
	case queue != "" && len(args) == 0:
		req.Queue = queue
		return req, "queue " + queue, nil
	case queue == "" && len(args) == 2:
		p, err := strconv.ParseInt(args[1], 10, 32)
		if err != nil || p < 0 {
			return req, "", fmt.Errorf("PARTITION: want a partition number, got %q", args[1])
		}
		req.Topic, req.Partition = args[0], int32(p)
		return req, fmt.Sprintf("%s/%d", req.Topic, req.Partition), nil
	}
	return req, "", errors.New("name TOPIC PARTITION, or --queue NAME, not both")
}
