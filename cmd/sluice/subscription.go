package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/queue"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// A subscription is a queue cursor over a topic: these commands create,
// show and delete it, and the queue commands read it as "TOPIC/NAME".

func subscriptionCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "subscription",
		Aliases: []string{"sub"},
		Short:   `Fan-out subscriptions: a queue over a topic, read with "sluice queue receive TOPIC/NAME"`,
		Args:    cobra.NoArgs,
	}
	cmd.AddCommand(subCreateCmd(f), subListCmd(f), subDescribeCmd(f), subDeleteCmd(f))
	return cmd
}

func subCreateCmd(f *clientFlags) *cobra.Command {
	var s queueSettings
	var keyOrdered, fromEarliest bool
	cmd := &cobra.Command{
		Use:   "create TOPIC NAME",
		Short: "Subscribe a queue to a topic: every record produced becomes one of its messages",
		Example: `  sluice topic subscription create orders billing --from-earliest
  sluice queue receive orders/billing -n 10`,
		Args: cobra.ExactArgs(2),
	}
	fl := cmd.Flags()
	fl.DurationVar(&s.vis, "visibility-timeout", 0, "how long a delivery stays hidden (default 30s)")
	fl.DurationVar(&s.ret, "retention", 0, "how long an unacked message is kept (default 96h)")
	fl.DurationVar(&s.delay, "delay", 0, "delay applied to every record before it is delivered")
	fl.StringVar(&s.dlq, "dead-letter-queue", "", "`queue` that receives records after --max-receives deliveries")
	fl.Int32Var(&s.maxReceives, "max-receives", 0, fmt.Sprintf("deliveries before a record is dead-lettered (1 to %d, with --dead-letter-queue)", queue.MaxReceivesLimit))
	fl.DurationVar(&s.maxExtension, "max-extension", 0, "bound on a delivery's total visibility through extend (default 12h)")
	fl.BoolVar(&keyOrdered, "key-ordered", false, "deliver each key in order, one in flight per key")
	fl.BoolVar(&fromEarliest, "from-earliest", false, "start at each partition's earliest record (default: only records produced from now)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		qc, err := s.config(cmd.Flags(), nil)
		if err != nil {
			return err
		}
		sub, err := c.CreateSubscription(ctx, args[0], args[1], &client.SubscriptionConfig{Queue: qc, KeyOrdered: keyOrdered, FromEarliest: fromEarliest})
		if err != nil {
			return err
		}
		return printSubs(cmd, f, []*client.Subscription{sub})
	})
	return withFields(cmd, queueSettingsFieldMap+",key_ordered=key-ordered,from_earliest=from-earliest")
}

func printSubs(cmd *cobra.Command, f *clientFlags, subs []*client.Subscription) error {
	if f.json() {
		return printJSON(cmd.OutOrStdout(), &sluicev1.ListSubscriptionsResponse{Subscriptions: subs})
	}
	rows := make([][]string, len(subs))
	for i, s := range subs {
		st := s.GetStats()
		rows[i] = []string{s.GetTopic() + "/" + s.GetName(), strconv.FormatInt(st.GetVisible(), 10), strconv.FormatInt(st.GetInFlight(), 10),
			strconv.FormatInt(st.GetDelayed(), 10), fmtDur(st.GetOldestMessageAge().AsDuration()), strconv.FormatBool(s.GetConfig().GetKeyOrdered())}
	}
	return table(cmd.OutOrStdout(), []string{"QUEUE", "VISIBLE", "IN FLIGHT", "DELAYED", "OLDEST", "KEY ORDERED"}, rows)
}

func subListCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "list TOPIC", Short: "List a topic's subscriptions with their message counts", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		subs, err := c.ListSubscriptions(ctx, args[0])
		if err != nil {
			return err
		}
		return printSubs(cmd, f, subs)
	})
	return cmd
}

func subDescribeCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "describe TOPIC NAME", Short: "Show a subscription's settings and stats", Args: cobra.ExactArgs(2)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		s, err := c.GetSubscription(ctx, args[0], args[1])
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), s)
		}
		return printSubs(cmd, f, []*client.Subscription{s})
	})
	return cmd
}

func subDeleteCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "delete TOPIC NAME", Short: "Delete a subscription and its cursor (the topic's records stay)", Args: cobra.ExactArgs(2)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if err := c.DeleteSubscription(ctx, args[0], args[1]); err != nil {
			return err
		}
		if f.json() {
			return printJSONObject(cmd.OutOrStdout(), "deleted", args[0]+"/"+args[1])
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "deleted %s/%s\n", args[0], args[1])
		return err
	})
	return cmd
}
