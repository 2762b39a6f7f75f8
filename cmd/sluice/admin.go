package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/node"
)

func init() { subcommands = append(subcommands, newAdminCmd) }

func newAdminCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("admin", "The operator's reports: what storage found damaged", f)
	cmd.AddCommand(adminCorruptionCmd(f))
	return cmd
}

func adminCorruptionCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "corruption",
		Short: "List the damaged batches storage quarantined (their offsets are skipped) and the queues that could not open",
		Long: `List what the broker's storage found damaged: every batch whose checksum or
framing was wrong when it was read or scrubbed, quarantined so that readers skip
its offsets (a Kafka consumer sees a gap, a queue counts the messages as lost),
with where it was and when it was found; and the queues that could not be opened
at start. docs/operations.md ("Corruption") says what to do about each.`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, _ []string) error {
		rep, err := fetchCorruption(ctx, f)
		if err != nil {
			return err
		}
		if f.json() {
			enc := json.NewEncoder(cmd.OutOrStdout())
			return enc.Encode(rep)
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "%d damaged batches found since the broker started; %d recorded:\n", rep.CorruptBatchesTotal, len(rep.Batches))
		rows := make([][]string, len(rep.Batches))
		for i, b := range rep.Batches {
			offsets := "-"
			if b.LastOffset >= b.FirstOffset {
				offsets = strconv.FormatInt(b.FirstOffset, 10) + "-" + strconv.FormatInt(b.LastOffset, 10)
			}
			rows[i] = []string{b.Owner, offsets, strconv.FormatInt(b.Length, 10), b.Found.Local().Format(time.DateTime),
				b.Segment + "@" + strconv.FormatInt(b.Position, 10), b.Reason}
		}
		if err := table(out, []string{"LOG", "OFFSETS", "BYTES", "FOUND", "WHERE", "WHY"}, rows); err != nil {
			return err
		}
		if len(rep.Unavailable) > 0 {
			fmt.Fprintf(out, "queues that could not be opened (see the server log; DeleteQueue removes one): %s\n",
				strings.Join(rep.Unavailable, ", "))
		}
		return nil
	})
	return cmd
}

func fetchCorruption(ctx context.Context, f *clientFlags) (*node.CorruptionReport, error) {
	var rep node.CorruptionReport
	if err := adminCall(ctx, f, f.server, "GET", node.CorruptionPath, nil, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", node.CorruptionPath, err)
	}
	return &rep, nil
}
