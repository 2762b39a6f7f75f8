package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

func init() { subcommands = append(subcommands, newDLQCmd) }

func newDLQCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("dlq", "Inspect dead-letter queues and redrive their messages", f)
	cmd.AddCommand(dlqListCmd(f), dlqSourcesCmd(f), dlqPreviewCmd(f), dlqRedriveCmd(f), dlqRedrivesCmd(f), dlqStatusCmd(f), dlqCancelCmd(f))
	return cmd
}

func dlqListCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-letter queues: depth, the queues that feed them, and their redrives",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
		qs, err := c.ListQueues(ctx, "")
		if err != nil {
			return err
		}
		redrives, err := c.ListRedrives(ctx, "")
		if err != nil {
			return err
		}
		var dlqs []*client.Queue
		for _, q := range qs {
			if len(q.GetDeadLetterSources()) > 0 {
				dlqs = append(dlqs, q)
			}
		}
		if f.json() {
			// One document: the dead-letter queues and the redrives.
			qs, err := protoList(dlqs)
			if err != nil {
				return err
			}
			rs, err := protoList(redrives)
			if err != nil {
				return err
			}
			return printJSONObject(cmd.OutOrStdout(), "deadLetterQueues", qs, "redrives", rs)
		}
		rows := make([][]string, len(dlqs))
		for i, q := range dlqs {
			st := q.GetStats()
			last := "-"
			for _, r := range redrives { // newest first
				if r.GetDeadLetterQueue() == q.GetName() {
					last = fmt.Sprintf("%s %s %d/%d", r.GetId(), redriveState(r), r.GetMoved(), r.GetToMove())
					break
				}
			}
			rows[i] = []string{q.GetName(), strconv.FormatInt(st.GetVisible()+st.GetInFlight()+st.GetDelayed(), 10),
				strings.Join(q.GetDeadLetterSources(), ","), last}
		}
		return table(cmd.OutOrStdout(), []string{"DEAD-LETTER QUEUE", "MESSAGES", "SOURCES", "LAST REDRIVE"}, rows)
	})
	return cmd
}

func redriveState(r *client.Redrive) string {
	return strings.ToLower(strings.TrimPrefix(r.GetState().String(), "REDRIVE_STATE_"))
}

func dlqRedriveCmd(f *clientFlags) *cobra.Command {
	var to, source string
	var rate int32
	var limit int64
	var detach bool
	cmd := &cobra.Command{
		Use:   "redrive DEAD_LETTER_QUEUE",
		Short: "Move dead letters back to their source queue (or --to another), showing progress",
		Args:  cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&to, "to", "", "destination `queue` (default: each message's source)")
	cmd.Flags().StringVar(&source, "source-queue", "", "only messages dead-lettered from this `queue`")
	cmd.Flags().Int32Var(&rate, "rate", 0, "at most this many messages per second (0: unlimited)")
	cmd.Flags().Int64Var(&limit, "limit", 0, "stop after this many (0: all)")
	cmd.Flags().BoolVar(&detach, "detach", false, `start the redrive and return; follow it with "sluice dlq status ID"`)
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if err := firstErr(intRange("rate", rate, 0, 1<<31-1), intRange("limit", limit, 0, 1<<63-1)); err != nil {
			return err
		}
		req := &client.StartRedriveRequest{DeadLetterQueue: args[0], DestinationQueue: to, MaxPerSecond: rate, Limit: limit}
		if source != "" {
			req.Filter = &client.RedriveFilter{SourceQueue: source}
		}
		r, err := c.StartRedrive(ctx, req)
		if err != nil {
			return err
		}
		if !detach {
			if r, err = followRedrive(ctx, cmd, c, r); err != nil {
				return err
			}
		}
		return printRedrive(cmd, f, r)
	})
	return withFields(cmd, "destination_queue=to,max_per_second=rate,source_queue=source-queue")
}

// followRedrive polls a redrive's progress until it ends; Ctrl-C stops
// following (the redrive goes on; cancel it with `sluice dlq cancel`).
func followRedrive(ctx context.Context, cmd *cobra.Command, c *client.Client, r *client.Redrive) (*client.Redrive, error) {
	p := newProgress(cmd, "moved", r.GetToMove())
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for r.GetState() == sluicev1.RedriveState_REDRIVE_STATE_RUNNING {
		p.update(r.GetMoved())
		select {
		case <-ctx.Done():
			p.done(r.GetMoved())
			return nil, fmt.Errorf("stopped following redrive %s; it keeps running (cancel: sluice dlq cancel %s)", r.GetId(), r.GetId())
		case <-tick.C:
		}
		var err error
		if r, err = c.GetRedrive(ctx, r.GetId()); err != nil {
			return nil, err
		}
	}
	p.done(r.GetMoved())
	if r.GetState() == sluicev1.RedriveState_REDRIVE_STATE_FAILED {
		return nil, fmt.Errorf("redrive %s failed after moving %d: %s", r.GetId(), r.GetMoved(), r.GetError().GetMetadata()["message"])
	}
	return r, nil
}

func printRedrive(cmd *cobra.Command, f *clientFlags, r *client.Redrive) error {
	if f.json() {
		return printJSON(cmd.OutOrStdout(), r)
	}
	return printRedrives(cmd, []*client.Redrive{r})
}

func printRedrives(cmd *cobra.Command, rs []*client.Redrive) error {
	rows := make([][]string, len(rs))
	for i, r := range rs {
		dest := r.GetDestinationQueue()
		if dest == "" {
			dest = "(source queues)"
		}
		rows[i] = []string{r.GetId(), r.GetDeadLetterQueue(), dest, redriveState(r),
			strconv.FormatInt(r.GetMoved(), 10), strconv.FormatInt(r.GetToMove(), 10)}
	}
	return table(cmd.OutOrStdout(), []string{"REDRIVE", "FROM", "TO", "STATE", "MOVED", "TO MOVE"}, rows)
}

func dlqRedrivesCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "redrives [DEAD_LETTER_QUEUE]",
		Short: "List redrives, newest first: all, or those of one dead-letter queue",
		Args:  cobra.MaximumNArgs(1),
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		rs, err := c.ListRedrives(ctx, strings.Join(args, ""))
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), &sluicev1.ListRedrivesResponse{Redrives: rs})
		}
		return printRedrives(cmd, rs)
	})
	return cmd
}

func dlqStatusCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "status REDRIVE_ID", Short: "Show one redrive's progress", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		r, err := c.GetRedrive(ctx, args[0])
		if err != nil {
			return err
		}
		return printRedrive(cmd, f, r)
	})
	return cmd
}

func dlqSourcesCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "sources QUEUE", Short: "List the queues whose dead-letter queue is QUEUE", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		srcs, err := c.DeadLetterSources(ctx, args[0])
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), &sluicev1.ListDeadLetterSourcesResponse{SourceQueues: srcs})
		}
		rows := make([][]string, len(srcs))
		for i, s := range srcs {
			rows[i] = []string{s}
		}
		return table(cmd.OutOrStdout(), []string{"SOURCE QUEUE"}, rows)
	})
	return cmd
}

func dlqCancelCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "cancel REDRIVE_ID", Short: "Stop a running redrive (what moved stays moved)", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		r, err := c.CancelRedrive(ctx, args[0])
		if err != nil {
			return err
		}
		return printRedrive(cmd, f, r)
	})
	return cmd
}
