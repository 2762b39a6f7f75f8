package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/queue"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

func init() { subcommands = append(subcommands, newQueueCmd) }

func newQueueCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("queue", "Create queues, send, receive and ack messages", f)
	cmd.AddCommand(queueCreateCmd(f), queueUpdateCmd(f), queueListCmd(f), queueDescribeCmd(f), queueSendCmd(f),
		queueReceiveCmd(f), queuePeekCmd(f), queueConsumeCmd(f), queueAckCmd(f), queueNackCmd(f), queueExtendCmd(f),
		queuePurgeCmd(f), queueDeleteCmd(f))
	return cmd
}

func durOrNil(d time.Duration, set bool) *durationpb.Duration {
	if !set {
		return nil
	}
	return durationpb.New(d)
}

// queueSettings are the settings flags of queue create and queue update.
type queueSettings struct {
	vis, ret, delay, wait, dedupWindow, maxExtension time.Duration
	maxBytes                                         int64
	dlq                                              string
	maxReceives                                      int32
	fifo, dedup, noDLQ                               bool
}

// settingFields maps each settings flag to the QueueConfig field
// (UpdateQueue's update_mask) it sets.
var settingFields = []struct{ flag, field string }{
	{"visibility-timeout", "visibility_timeout"}, {"retention", "retention"}, {"delay", "delay"},
	{"receive-wait", "receive_wait"}, {"max-message-bytes", "max_message_bytes"},
	{"dead-letter-queue", "dead_letter"}, {"max-receives", "dead_letter"}, {"no-dead-letter", "dead_letter"},
	{"content-dedup", "content_based_deduplication"}, {"dedup-window", "deduplication_window"},
	{"max-extension", "max_visibility_extension"},
}

// queueSettingsFieldMap is the annotation naming the flags of fields
// whose flag is not their kebab-case name.
const queueSettingsFieldMap = "default_delay=delay,dead_letter_queue=dead-letter-queue,content_based_dedup=content-dedup," +
	"content_based_deduplication=content-dedup,dedup_window=dedup-window,deduplication_window=dedup-window," +
	"max_extension=max-extension,max_visibility_extension=max-extension"

func (s *queueSettings) addFlags(fl *pflag.FlagSet, create bool) {
	fl.DurationVar(&s.vis, "visibility-timeout", 0, fmt.Sprintf("how long a delivery stays hidden (default 30s, at most %v)", shortDur(maxVisibility)))
	fl.DurationVar(&s.ret, "retention", 0, "how long an unacked message is kept (default 96h; 60s to 8760h)")
	fl.DurationVar(&s.delay, "delay", 0, "delay applied to every message sent without its own")
	fl.DurationVar(&s.wait, "receive-wait", 0, "default long-poll wait of a receive (at most 20s)")
	fl.Int64Var(&s.maxBytes, "max-message-bytes", 0, "largest message accepted (default and at most 1 MiB)")
	fl.StringVar(&s.dlq, "dead-letter-queue", "", "`queue` that receives messages after --max-receives deliveries")
	fl.Int32Var(&s.maxReceives, "max-receives", 0, fmt.Sprintf("deliveries before a message is dead-lettered (1 to %d, with --dead-letter-queue)", queue.MaxReceivesLimit))
	fl.BoolVar(&s.dedup, "content-dedup", false, "FIFO: deduplicate by body when a send has no deduplication id")
	fl.DurationVar(&s.dedupWindow, "dedup-window", 0, "FIFO: how long a deduplication id is remembered (default 5m)")
	fl.DurationVar(&s.maxExtension, "max-extension", 0, "bound on a delivery's total visibility through extend (default 12h)")
	if create {
		fl.BoolVar(&s.fifo, "fifo", false, "FIFO queue (its name must end in .fifo)")
	} else {
		fl.BoolVar(&s.noDLQ, "no-dead-letter", false, "remove the dead-letter policy")
	}
}

// config builds the QueueConfig of the flags given; cur is the queue's
// current config on update (a new --max-receives keeps the current
// dead-letter queue and the other way round), nil on create.
func (s *queueSettings) config(fl *pflag.FlagSet, cur *client.QueueConfig) (*client.QueueConfig, error) {
	if err := queueFlagErr(fl, s); err != nil {
		return nil, err
	}
	cfg := &client.QueueConfig{
		VisibilityTimeout: durOrNil(s.vis, fl.Changed("visibility-timeout")), Retention: durOrNil(s.ret, fl.Changed("retention")),
		Delay: durOrNil(s.delay, fl.Changed("delay")), ReceiveWait: durOrNil(s.wait, fl.Changed("receive-wait")),
		DeduplicationWindow:    durOrNil(s.dedupWindow, fl.Changed("dedup-window")),
		MaxVisibilityExtension: durOrNil(s.maxExtension, fl.Changed("max-extension")),
		MaxMessageBytes:        s.maxBytes, Fifo: s.fifo, ContentBasedDeduplication: s.dedup,
	}
	dlq, maxReceives := s.dlq, s.maxReceives
	if cur != nil {
		if !fl.Changed("dead-letter-queue") {
			dlq = cur.GetDeadLetter().GetQueue()
		}
		if !fl.Changed("max-receives") {
			maxReceives = cur.GetDeadLetter().GetMaxReceives()
		}
	}
	switch {
	case s.noDLQ && (fl.Changed("dead-letter-queue") || fl.Changed("max-receives")):
		return nil, errors.New("--no-dead-letter removes the policy: give it without --dead-letter-queue and --max-receives")
	case s.noDLQ:
	case (dlq != "") != (maxReceives > 0):
		return nil, errors.New("--dead-letter-queue and --max-receives go together: give both, e.g. --dead-letter-queue jobs-dlq --max-receives 5")
	case dlq != "":
		cfg.DeadLetter = &client.DeadLetterPolicy{Queue: dlq, MaxReceives: maxReceives}
	}
	return cfg, nil
}

func queueCreateCmd(f *clientFlags) *cobra.Command {
	var s queueSettings
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a queue (again with the same settings is not an error)",
		Args:  cobra.ExactArgs(1),
	}
	s.addFlags(cmd.Flags(), true)
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		cfg, err := s.config(cmd.Flags(), nil)
		if err != nil {
			return err
		}
		q, err := c.CreateQueue(ctx, args[0], cfg)
		if err != nil {
			return err
		}
		return printQueues(cmd, f, []*client.Queue{q})
	})
	return withFields(cmd, queueSettingsFieldMap)
}

func queueUpdateCmd(f *clientFlags) *cobra.Command {
	var s queueSettings
	cmd := &cobra.Command{
		Use:   "update NAME --SETTING VALUE...",
		Short: "Change a queue's settings: only the flags given change (fifo cannot)",
		Example: `  sluice queue update jobs --visibility-timeout 2m
  sluice queue update jobs --dead-letter-queue jobs-dlq --max-receives 5
  sluice queue update jobs --no-dead-letter`,
		Args: cobra.ExactArgs(1),
	}
	s.addFlags(cmd.Flags(), false)
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		var mask []string
		for _, sf := range settingFields {
			if cmd.Flags().Changed(sf.flag) && !slices.Contains(mask, sf.field) {
				mask = append(mask, sf.field)
			}
		}
		if len(mask) == 0 {
			return errors.New("name at least one setting to change, e.g. --visibility-timeout 2m (see --help)")
		}
		var cur *client.QueueConfig
		if slices.Contains(mask, "dead_letter") {
			q, err := c.GetQueue(ctx, args[0])
			if err != nil {
				return err
			}
			cur = q.GetConfig()
		}
		cfg, err := s.config(cmd.Flags(), cur)
		if err != nil {
			return err
		}
		q, err := c.UpdateQueue(ctx, args[0], cfg, mask...)
		if err != nil {
			return err
		}
		return printQueues(cmd, f, []*client.Queue{q})
	})
	return withFields(cmd, queueSettingsFieldMap)
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
		if why := q.GetUnavailable(); why != "" {
			// A queue that could not be opened: listed, with why, instead of made-up zeros.
			rows[i] = []string{q.GetName(), "-", "-", "-", "-", "-", "UNAVAILABLE: " + why}
		}
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
			{"max extension", fmtDur(cfg.GetMaxVisibilityExtension().AsDuration())},
			{"dedup window", fmtDur(cfg.GetDeduplicationWindow().AsDuration())},
			{"content dedup", strconv.FormatBool(cfg.GetContentBasedDeduplication())},
			{"dead-letter queue", cfg.GetDeadLetter().GetQueue()},
			{"max receives", strconv.Itoa(int(cfg.GetDeadLetter().GetMaxReceives()))},
			{"dead-letter sources", strings.Join(q.GetDeadLetterSources(), ",")},
			{"visible", strconv.FormatInt(st.GetVisible(), 10)}, {"in flight", strconv.FormatInt(st.GetInFlight(), 10)},
			{"delayed", strconv.FormatInt(st.GetDelayed(), 10)}, {"oldest message", fmtDur(st.GetOldestMessageAge().AsDuration())},
			{"dead-letter depth", strconv.FormatInt(st.GetDeadLetterDepth(), 10)},
			{"sent", fmt.Sprint(st.GetSentTotal())}, {"received", fmt.Sprint(st.GetReceivedTotal())},
			{"acked", fmt.Sprint(st.GetAckedTotal())}, {"redelivered", fmt.Sprint(st.GetRedeliveredTotal())},
			{"dead-lettered", fmt.Sprint(st.GetDeadLetteredTotal())}, {"expired", fmt.Sprint(st.GetExpiredTotal())},
			{"stale acks refused", fmt.Sprint(st.GetStaleAckRefusedTotal())},
		}
		return table(cmd.OutOrStdout(), []string{"FIELD", "VALUE"}, rows)
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
		if f.json() {
			return printJSONObject(cmd.OutOrStdout(), "deleted", args[0])
		}
		fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
		return nil
	})
	return cmd
}
