package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/node"
)

func clusterElectCmd(f *clientFlags) *cobra.Command {
	var queue string
	cmd := &cobra.Command{
		Use:   "elect (TOPIC PARTITION | --queue NAME)",
		Short: "Make a partition's or a queue's preferred replica its leader now",
		Long: `Hand the leadership of TOPIC's PARTITION, or of queue --queue, to its preferred
replica (the first of its replicas, as "sluice cluster status" lists them) and wait
until it leads. Any node takes the request and asks the group's leader. Leaders
go back to their preferred replicas by themselves every --cluster-leader-balance
(10 s by default); with that off (0) this command, or Kafka's ElectLeaders
(kafka-leader-election.sh --election-type preferred) for partitions, does it.
A preferred replica that leads already is reported as such, and one not in sync
with the leader cannot take over yet (docs/cluster.md, "Topics").`,
		Args: cobra.RangeArgs(0, 2),
	}
	cmd.Flags().StringVar(&queue, "queue", "", "the `queue` to elect the leader of (instead of TOPIC PARTITION)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, args []string) error {
		var req node.ElectRequest
		var what string
		switch {
		case queue != "" && len(args) == 0:
			req.Queue, what = queue, "queue "+queue
		case queue == "" && len(args) == 2:
			p, err := strconv.ParseInt(args[1], 10, 32)
			if err != nil || p < 0 {
				return fmt.Errorf("PARTITION: want a partition number, got %q", args[1])
			}
			req.Topic, req.Partition = args[0], int32(p)
			what = fmt.Sprintf("%s/%d", req.Topic, req.Partition)
		default:
			return errors.New("name TOPIC PARTITION, or --queue NAME, not both")
		}
		err := adminCall(ctx, f, f.server, "POST", node.ClusterElectPath, req, nil)
		var ae node.AdminError
		switch {
		case errors.As(err, &ae) && ae.Message == broker.ErrElectionNotNeeded.Error():
			fmt.Fprintf(cmd.OutOrStdout(), "%s was led by its preferred replica already\n", what)
		case err != nil:
			return err
		default:
			fmt.Fprintf(cmd.OutOrStdout(), "%s is led by its preferred replica\n", what)
		}
		return nil
	})
	return cmd
}
