package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/broker"
)

// maxPeek is the server's bound on one peek and one preview's sample.
const maxPeek = broker.PeekMax

func queuePeekCmd(f *clientFlags) *cobra.Command {
	var max int32
	var from uint64
	cmd := &cobra.Command{
		Use:   "peek QUEUE",
		Short: "Show a queue's (or a dead-letter queue's) messages without receiving them",
		Long: `Show a queue's unfinished messages in send order, with their state (visible,
in_flight, delayed, blocked), without receiving them: nothing is hidden, no
receive is counted, no receipt is made, so a dead-letter queue can be looked
into before a redrive. The last line says where the next page starts
(--from).`,
		Example: "  sluice queue peek orders-dlq -n 20\n  sluice queue peek orders --from 120",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().Int32VarP(&max, "max", "n", 10, fmt.Sprintf("show up to this many (1 to %d)", maxPeek))
	cmd.Flags().Uint64Var(&from, "from", 0, "start at this sequence (0: the first unfinished message)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if err := intRange("max", max, 1, maxPeek); err != nil {
			return err
		}
		res, err := c.Peek(ctx, args[0], from, max)
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), res)
		}
		if err := printPeeked(cmd.OutOrStdout(), res.GetMessages()); err != nil {
			return err
		}
		if res.GetNextSequence() < res.GetEndSequence() {
			fmt.Fprintf(cmd.ErrOrStderr(), "more from --from %d\n", res.GetNextSequence())
		}
		return nil
	})
	return withFields(cmd, "max_messages=max,from_sequence=from")
}

func peekState(p *client.PeekedMessage) string {
	return strings.ToLower(strings.TrimPrefix(p.GetState().String(), "MESSAGE_STATE_"))
}

func printPeeked(w io.Writer, ms []*client.PeekedMessage) error {
	rows := make([][]string, len(ms))
	for i, p := range ms {
		m := p.GetMessage()
		from := "-"
		if dl := m.GetDeadLetter(); dl != nil {
			from = dl.GetSourceQueue()
		}
		rows[i] = []string{strconv.FormatUint(m.GetSequence(), 10), m.GetId(), peekState(p),
			strconv.Itoa(int(m.GetReceiveCount())), from, printable(m.GetBody())}
	}
	return table(w, []string{"SEQ", "MESSAGE ID", "STATE", "RECEIVES", "DEAD-LETTERED FROM", "BODY"}, rows)
}

func dlqPreviewCmd(f *clientFlags) *cobra.Command {
	var to, source string
	var limit int64
	var sample int32
	cmd := &cobra.Command{
		Use:   "preview DEAD_LETTER_QUEUE",
		Short: "Show what a redrive with the same flags would move, changing nothing",
		Long: `Count the messages "sluice dlq redrive" with the same --to, --source-queue
and --limit would move now, per destination queue, and show the first of
them. Nothing moves and nothing is received.`,
		Example: "  sluice dlq preview orders-dlq\n  sluice dlq preview orders-dlq --source-queue orders --limit 100",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&to, "to", "", "destination `queue` (default: each message's source)")
	cmd.Flags().StringVar(&source, "source-queue", "", "only messages dead-lettered from this `queue`")
	cmd.Flags().Int64Var(&limit, "limit", 0, "as the redrive's: at most this many (0: all)")
	cmd.Flags().Int32Var(&sample, "sample", 10, fmt.Sprintf("show this many of them (0 to %d)", maxPeek))
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if err := firstErr(intRange("limit", limit, 0, 1<<63-1), intRange("sample", sample, 0, maxPeek)); err != nil {
			return err
		}
		req := &client.PreviewRedriveRequest{DeadLetterQueue: args[0], DestinationQueue: to, Limit: limit, SampleSize: &sample}
		if source != "" {
			req.Filter = &client.RedriveFilter{SourceQueue: source}
		}
		p, err := c.PreviewRedrive(ctx, req)
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), p)
		}
		w := cmd.OutOrStdout()
		count := strconv.FormatInt(p.GetCount(), 10)
		if !p.GetComplete() {
			count = "at least " + count + " (looked at the first " + strconv.FormatInt(p.GetExamined(), 10) + ")"
		}
		fmt.Fprintf(w, "would move %s of %d messages\n", count, p.GetExamined())
		for _, d := range p.GetDestinations() {
			fmt.Fprintf(w, "  %d to %s\n", d.GetCount(), d.GetQueue())
		}
		if n := p.GetWaiting(); n > 0 {
			fmt.Fprintf(w, "  not counted: %d in flight or delayed (a redrive started now moves them only if they are visible again before it ends)\n", n)
		}
		if n := p.GetUnroutable(); n > 0 {
			fmt.Fprintf(w, "  %d with no source queue: a redrive fails on them unless --to names a queue\n", n)
		}
		if len(p.GetSample()) == 0 {
			return nil
		}
		fmt.Fprintln(w)
		return printPeeked(w, p.GetSample())
	})
	return withFields(cmd, "destination_queue=to,source_queue=source-queue,sample_size=sample")
}
