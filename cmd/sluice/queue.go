package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

func init() { subcommands = append(subcommands, newQueueCmd) }

func newQueueCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("queue", "Create queues, send, receive and ack messages", f)
	cmd.AddCommand(queueCreateCmd(f), queueListCmd(f), queueDescribeCmd(f), queueSendCmd(f),
		queueReceiveCmd(f), queueAckCmd(f), queuePurgeCmd(f), queueDeleteCmd(f))
	return cmd
}

func durOrNil(d time.Duration, set bool) *durationpb.Duration {
	if !set {
		return nil
	}
	return durationpb.New(d)
}

func queueCreateCmd(f *clientFlags) *cobra.Command {
	var vis, ret, delay, wait time.Duration
	var maxBytes int64
	var dlq string
	var maxReceives int32
	var fifo, dedup bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a queue (again with the same settings is not an error)",
		Args:  cobra.ExactArgs(1),
	}
	fl := cmd.Flags()
	fl.DurationVar(&vis, "visibility-timeout", 0, "how long a delivery stays hidden (default 30s)")
	fl.DurationVar(&ret, "retention", 0, "how long an unacked message is kept (default 96h)")
	fl.DurationVar(&delay, "delay", 0, "delay applied to every message")
	fl.DurationVar(&wait, "receive-wait", 0, "default long-poll wait of a receive")
	fl.Int64Var(&maxBytes, "max-message-bytes", 0, "largest message accepted (default 1 MiB)")
	fl.StringVar(&dlq, "dead-letter-queue", "", "`queue` that receives messages after --max-receives deliveries")
	fl.Int32Var(&maxReceives, "max-receives", 0, "deliveries before a message is dead-lettered")
	fl.BoolVar(&fifo, "fifo", false, "FIFO queue (its name must end in .fifo)")
	fl.BoolVar(&dedup, "content-dedup", false, "FIFO: deduplicate by body when a send has no deduplication id")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		cfg := &client.QueueConfig{
			VisibilityTimeout: durOrNil(vis, fl.Changed("visibility-timeout")), Retention: durOrNil(ret, fl.Changed("retention")),
			Delay: durOrNil(delay, fl.Changed("delay")), ReceiveWait: durOrNil(wait, fl.Changed("receive-wait")),
			MaxMessageBytes: maxBytes, Fifo: fifo, ContentBasedDeduplication: dedup,
		}
		if dlq != "" || maxReceives > 0 {
			cfg.DeadLetter = &client.DeadLetterPolicy{Queue: dlq, MaxReceives: maxReceives}
		}
		q, err := c.CreateQueue(ctx, args[0], cfg)
		if err != nil {
			return err
		}
		return printQueues(cmd, f, []*client.Queue{q})
	})
	return cmd
}

func printQueues(cmd *cobra.Command, f *clientFlags, qs []*client.Queue) error {
	if f.json() {
		return printJSON(cmd.OutOrStdout(), &sluicev1.ListQueuesResponse{Queues: qs})
	}
	rows := make([][]string, len(qs))
	for i, q := range qs {
		st := q.GetStats()
		dl := "-"
		if p := q.GetConfig().GetDeadLetter(); p != nil {
			dl = fmt.Sprintf("%s after %d", p.GetQueue(), p.GetMaxReceives())
		}
		rows[i] = []string{q.GetName(), strconv.FormatInt(st.GetVisible(), 10), strconv.FormatInt(st.GetInFlight(), 10),
			strconv.FormatInt(st.GetDelayed(), 10), fmtDur(st.GetOldestMessageAge().AsDuration()),
			strconv.FormatInt(st.GetDeadLetterDepth(), 10), dl}
	}
	return table(cmd.OutOrStdout(), []string{"NAME", "VISIBLE", "IN FLIGHT", "DELAYED", "OLDEST", "DLQ DEPTH", "DEAD LETTERS TO"}, rows)
}

func queueListCmd(f *clientFlags) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{Use: "list", Short: "List queues with their message counts", Args: cobra.NoArgs}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only queues whose name starts with this")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
		qs, err := c.ListQueues(ctx, prefix)
		if err != nil {
			return err
		}
		return printQueues(cmd, f, qs)
	})
	return cmd
}

func queueDescribeCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "describe NAME", Short: "Show a queue's settings and stats", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		q, err := c.GetQueue(ctx, args[0])
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), q)
		}
		cfg, st := q.GetConfig(), q.GetStats()
		rows := [][]string{
			{"name", q.GetName()}, {"fifo", strconv.FormatBool(cfg.GetFifo())},
			{"visibility timeout", fmtDur(cfg.GetVisibilityTimeout().AsDuration())},
			{"retention", fmtDur(cfg.GetRetention().AsDuration())}, {"delay", fmtDur(cfg.GetDelay().AsDuration())},
			{"receive wait", fmtDur(cfg.GetReceiveWait().AsDuration())},
			{"max message bytes", strconv.FormatInt(cfg.GetMaxMessageBytes(), 10)},
			{"dead-letter queue", cfg.GetDeadLetter().GetQueue()},
			{"max receives", strconv.Itoa(int(cfg.GetDeadLetter().GetMaxReceives()))},
			{"dead-letter sources", strings.Join(q.GetDeadLetterSources(), ",")},
			{"visible", strconv.FormatInt(st.GetVisible(), 10)}, {"in flight", strconv.FormatInt(st.GetInFlight(), 10)},
			{"delayed", strconv.FormatInt(st.GetDelayed(), 10)}, {"oldest message", fmtDur(st.GetOldestMessageAge().AsDuration())},
			{"dead-letter depth", strconv.FormatInt(st.GetDeadLetterDepth(), 10)},
			{"sent", fmt.Sprint(st.GetSentTotal())}, {"received", fmt.Sprint(st.GetReceivedTotal())},
			{"acked", fmt.Sprint(st.GetAckedTotal())}, {"redelivered", fmt.Sprint(st.GetRedeliveredTotal())},
			{"dead-lettered", fmt.Sprint(st.GetDeadLetteredTotal())}, {"stale acks refused", fmt.Sprint(st.GetStaleAckRefusedTotal())},
		}
		return table(cmd.OutOrStdout(), []string{"FIELD", "VALUE"}, rows)
	})
	return cmd
}

func queueSendCmd(f *clientFlags) *cobra.Command {
	var groupID, dedupID string
	var delay time.Duration
	var attrs []string
	cmd := &cobra.Command{
		Use:   "send QUEUE [BODY...]",
		Short: "Send messages: each argument, or else each line of stdin, is one message",
		Args:  cobra.MinimumNArgs(1),
	}
	cmd.Flags().StringVar(&groupID, "group-id", "", "FIFO message group")
	cmd.Flags().StringVar(&dedupID, "dedup-id", "", "FIFO deduplication id (one message only)")
	cmd.Flags().DurationVar(&delay, "delay", 0, "keep the messages invisible this long")
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "string attribute `name=value` (repeatable)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		bodies, err := lines(args[1:], cmd.InOrStdin())
		if err != nil {
			return err
		}
		var opts []client.SendOption
		for _, a := range attrs {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				return fmt.Errorf("--attr %q: want name=value", a)
			}
			opts = append(opts, client.WithAttribute(k, "String", []byte(v)))
		}
		if groupID != "" {
			opts = append(opts, client.WithGroupID(groupID))
		}
		if dedupID != "" {
			opts = append(opts, client.WithDeduplicationID(dedupID))
		}
		if cmd.Flags().Changed("delay") {
			opts = append(opts, client.WithDelay(delay))
		}
		return sendAll(ctx, cmd, f, c, args[0], bodies, opts)
	})
	return cmd
}

// sendAll sends bodies in batches of 100, showing progress on stderr.
func sendAll(ctx context.Context, cmd *cobra.Command, f *clientFlags, c *client.Client, queue string, bodies []string, opts []client.SendOption) error {
	var results []*client.SendResult
	p := newProgress(cmd, "sent", int64(len(bodies)))
	for start := 0; start < len(bodies); start += 100 {
		batch := make([]*client.SendEntry, 0, 100)
		for _, b := range bodies[start:min(start+100, len(bodies))] {
			batch = append(batch, client.Entry([]byte(b), opts...))
		}
		res, err := c.SendBatch(ctx, queue, batch)
		if err != nil {
			p.done(int64(len(results)))
			return fmt.Errorf("after %d of %d sent: %w", len(results), len(bodies), err)
		}
		results = append(results, res...)
		p.update(int64(len(results)))
	}
	p.done(int64(len(results)))
	if f.json() {
		return printJSON(cmd.OutOrStdout(), &sluicev1.SendBatchResponse{Results: results})
	}
	rows := make([][]string, len(results))
	for i, r := range results {
		rows[i] = []string{r.GetMessageId(), strconv.FormatUint(r.GetSequence(), 10), strconv.FormatBool(r.GetDuplicate())}
	}
	return table(cmd.OutOrStdout(), []string{"MESSAGE ID", "SEQUENCE", "DUPLICATE"}, rows)
}

func queueReceiveCmd(f *clientFlags) *cobra.Command {
	var max int
	var wait, vis time.Duration
	var ack, quiet bool
	cmd := &cobra.Command{
		Use:   "receive QUEUE",
		Short: "Receive messages (they stay hidden for the visibility timeout until acked)",
		Args:  cobra.ExactArgs(1),
	}
	cmd.Flags().IntVarP(&max, "max", "n", 1, "receive up to this many (1-100)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "long-poll: wait up to this long for a first message (at most 20s)")
	cmd.Flags().DurationVar(&vis, "visibility-timeout", 0, "hide the deliveries this long instead of the queue's timeout")
	cmd.Flags().BoolVar(&ack, "ack", false, "ack each message right after receiving it")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the receipts, one per line (pipe them to `sluice queue ack`)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		opts := []client.ReceiveOption{client.MaxMessages(max), client.Wait(wait)}
		if vis > 0 {
			opts = append(opts, client.Visibility(vis))
		}
		msgs, err := c.Receive(ctx, args[0], opts...)
		if err != nil {
			return err
		}
		if ack {
			for _, m := range msgs {
				if err := c.Ack(ctx, args[0], m.GetReceipt()); err != nil {
					return err
				}
			}
		}
		return printMessages(cmd, f, msgs, quiet)
	})
	return cmd
}

func printMessages(cmd *cobra.Command, f *clientFlags, msgs []*client.Message, quiet bool) error {
	w := cmd.OutOrStdout()
	switch {
	case quiet:
		for _, m := range msgs {
			fmt.Fprintln(w, m.GetReceipt())
		}
		return nil
	case f.json():
		return printJSON(w, &sluicev1.ReceiveResponse{Messages: msgs})
	}
	rows := make([][]string, len(msgs))
	for i, m := range msgs {
		rows[i] = []string{m.GetId(), strconv.Itoa(int(m.GetReceiveCount())), printable(m.GetBody()), m.GetReceipt()}
	}
	return table(w, []string{"MESSAGE ID", "RECEIVES", "BODY", "RECEIPT"}, rows)
}

func queueAckCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ack QUEUE [RECEIPT...]",
		Short: "Ack (delete) received messages by receipt: arguments, or else lines of stdin",
		Args:  cobra.MinimumNArgs(1),
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		receipts, err := lines(args[1:], cmd.InOrStdin())
		if err != nil {
			return err
		}
		acked := 0
		for start := 0; start < len(receipts); start += 100 {
			chunk := receipts[start:min(start+100, len(receipts))]
			errs, err := c.AckBatch(ctx, args[0], chunk)
			if err != nil {
				return err
			}
			for i, e := range errs {
				if e != nil {
					return fmt.Errorf("receipt %d (%s): %w (%d acked before it)", start+i+1, chunk[i], e, acked)
				}
				acked++
			}
		}
		if f.json() {
			fmt.Fprintf(cmd.OutOrStdout(), "{\"acked\":%d}\n", acked)
			return nil
		}
		fmt.Fprintf(cmd.OutOrStdout(), "acked %d\n", acked)
		return nil
	})
	return cmd
}

func queuePurgeCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "purge QUEUE", Short: "Delete every message of a queue, in flight or not", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		n, err := c.PurgeQueue(ctx, args[0])
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), &sluicev1.PurgeQueueResponse{Purged: n})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "purged %d\n", n)
		return nil
	})
	return cmd
}

func queueDeleteCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "delete QUEUE", Short: "Delete a queue and its messages", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if err := c.DeleteQueue(ctx, args[0]); err != nil {
			return err
		}
		if !f.json() {
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
		}
		return nil
	})
	return cmd
}
