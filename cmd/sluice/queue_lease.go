package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
)

// nack and extend act on deliveries one receipt at a time (the API has no
// batch form of either); they stop at the first refusal and say how many
// went through before it.

func queueNackCmd(f *clientFlags) *cobra.Command {
	var delay time.Duration
	var reason string
	cmd := &cobra.Command{
		Use:   "nack QUEUE [RECEIPT...]",
		Short: "Release deliveries by receipt (arguments, or else lines of stdin): visible again now or after --delay",
		Example: `  sluice queue nack jobs "$RECEIPT" --delay 30s --reason "upstream timeout"
  sluice queue receive jobs -n 10 -q | sluice queue nack jobs`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.Flags().DurationVar(&delay, "delay", 0, "visible again after this long (0: at once)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the message was given up on; kept if it ends in the dead-letter queue")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if err := durRange("delay", delay, 0, maxVisibility); err != nil {
			return err
		}
		receipts, err := receiptArgs(cmd, args[1:])
		if err != nil {
			return err
		}
		for i, r := range receipts {
			if err := c.Nack(ctx, args[0], r, delay, reason); err != nil {
				return fmt.Errorf("receipt %d (%s): %w (%d nacked before it)", i+1, r, err, i)
			}
		}
		return printCount(cmd, f, "nacked", len(receipts))
	})
	return cmd
}

func queueExtendCmd(f *clientFlags) *cobra.Command {
	var vis time.Duration
	cmd := &cobra.Command{
		Use:   "extend QUEUE [RECEIPT...] --visibility-timeout D",
		Short: "Keep deliveries hidden for --visibility-timeout from now (a heartbeat): receipts as arguments or lines of stdin",
		Args:  cobra.MinimumNArgs(1),
	}
	cmd.Flags().DurationVar(&vis, "visibility-timeout", 0, fmt.Sprintf("new visibility, counted from now (required; at most %v)", shortDur(maxVisibility)))
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if !cmd.Flags().Changed("visibility-timeout") {
			return fmt.Errorf("--visibility-timeout is required: how long from now the deliveries stay hidden, e.g. --visibility-timeout 5m")
		}
		if err := durRange("visibility-timeout", vis, 0, maxVisibility); err != nil {
			return err
		}
		receipts, err := receiptArgs(cmd, args[1:])
		if err != nil {
			return err
		}
		rows := make([][]string, len(receipts))
		deadlines := make([]string, len(receipts))
		for i, r := range receipts {
			d, err := c.Extend(ctx, args[0], r, vis)
			if err != nil {
				return fmt.Errorf("receipt %d (%s): %w (%d extended before it)", i+1, r, err, i)
			}
			deadlines[i] = d.UTC().Format(time.RFC3339Nano)
			rows[i] = []string{deadlines[i], r}
		}
		if f.json() {
			return printJSONObject(cmd.OutOrStdout(), "extended", len(receipts), "visibilityDeadlines", deadlines)
		}
		return table(cmd.OutOrStdout(), []string{"VISIBLE AGAIN AT", "RECEIPT"}, rows)
	})
	return cmd
}

// printCount prints "verb n", or {"verb": n} with -o json.
func printCount(cmd *cobra.Command, f *clientFlags, verb string, n int) error {
	if f.json() {
		return printJSONObject(cmd.OutOrStdout(), verb, n)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %d\n", verb, n)
	return err
}
