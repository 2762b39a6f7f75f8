package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/node"
)

func clusterAddNodeCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "add-node ID=HOST:PORT",
		Short: "Admit a node to the cluster: its id and its --cluster-addr",
		Long: `Admit node ID, whose Raft transport listens at HOST:PORT (its --cluster-addr), to
the cluster. Start the node with --cluster-join and --cluster-peers naming the
members and itself, before or after this command. The metadata group takes it as a
learner, then as a voter if it has fewer than three; a rebalance moves replicas onto
it. A node id that was removed is refused: ids are never reused (docs/cluster.md,
"Add a node").`,
		Args: cobra.ExactArgs(1),
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, args []string) error {
		id, addr, ok := strings.Cut(args[0], "=")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || n <= 0 || addr == "" {
			return fmt.Errorf("want ID=HOST:PORT, got %q", args[0])
		}
		if err := adminCall(ctx, f, f.server, "POST", node.ClusterNodesPath, node.NodeRequest{ID: int32(n), Addr: addr}, nil); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "node %d admitted at %s; \"sluice cluster status\" shows it join\n", n, addr)
		return nil
	})
	return cmd
}

func clusterRemoveNodeCmd(f *clientFlags) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "remove-node ID",
		Short: "Move every replica off a node, then take it out of the cluster",
		Long: `Remove node ID: the catalog re-places every replica it holds on the other nodes,
each group's leader moves it (a learner, caught up, promoted, the old replica
removed), then the node leaves the metadata group. Refused if some group would have
nowhere to keep its replicas (add a node first). The command waits, up to --wait,
until the node holds nothing; then stop the node. Its id is never admitted again.`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the moves (0: do not wait)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, args []string) error {
		n, err := strconv.ParseInt(args[0], 10, 32)
		if err != nil || n <= 0 {
			return fmt.Errorf("ID: want a node id, got %q", args[0])
		}
		if err := adminCall(ctx, f, f.server, "DELETE", node.ClusterNodesPath+"/"+args[0], nil, nil); err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "node %d removed from the catalog; its replicas are moving\n", n)
		deadline := time.Now().Add(wait)
		last := ""
		for wait > 0 {
			var st broker.ClusterStatus
			if err := adminCall(ctx, f, f.server, "GET", node.ClusterPath, nil, &st); err != nil {
				return err
			}
			left := nodeHolds(st.Membership, int32(n))
			if left == "" {
				fmt.Fprintf(out, "node %d holds nothing and is out of the metadata group: stop it\n", n)
				return nil
			}
			if left != last {
				fmt.Fprintf(out, "waiting: %s\n", left)
				last = left
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %d still in use after %s (%s): \"sluice cluster status\" shows the moves", n, wait, left)
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

// nodeHolds says what still keeps node n in the cluster ("" nothing).
func nodeHolds(m broker.MembershipState, n int32) string {
	var what []string
	for _, mv := range m.Moves {
		if slices.Contains(mv.Old, n) || slices.Contains(mv.Replicas, n) {
			what = append(what, mv.What)
		}
	}
	if len(what) > 0 {
		return fmt.Sprintf("%d moves (%s)", len(what), strings.Join(what, ", "))
	}
	if slices.Contains(m.MetaVoters, n) || slices.Contains(m.MetaLearners, n) {
		return "the metadata group"
	}
	return ""
}

// printMembership ends `cluster status`: the metadata group's members, removed ids and
// the moves in progress.
func printMembership(out io.Writer, m broker.MembershipState) error {
	fmt.Fprintf(out, "\nmetadata group: voters %s", ids(m.MetaVoters))
	if len(m.MetaLearners) > 0 {
		fmt.Fprintf(out, ", learners %s", ids(m.MetaLearners))
	}
	if len(m.Removed) > 0 {
		fmt.Fprintf(out, "; removed nodes %s", ids(m.Removed))
	}
	fmt.Fprintln(out)
	if len(m.Moves) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	rows := make([][]string, len(m.Moves))
	for i, mv := range m.Moves {
		rows[i] = []string{mv.What, strconv.FormatUint(mv.Group, 10), ids(mv.Old), ids(mv.Replicas)}
	}
	return table(out, []string{"MOVING", "GROUP", "FROM", "TO"}, rows)
}
