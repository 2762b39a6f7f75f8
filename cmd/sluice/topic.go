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

func init() { subcommands = append(subcommands, newTopicCmd) }

func newTopicCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("topic", "Create topics, produce and consume records", f)
	cmd.AddCommand(topicCreateCmd(f), topicListCmd(f), topicDescribeCmd(f), topicDeleteCmd(f), topicAddPartitionsCmd(f),
		topicOffsetsCmd(f), topicProduceCmd(f), topicConsumeCmd(f), subscriptionCmd(f))
	return cmd
}

func topicCreateCmd(f *clientFlags) *cobra.Command {
	var partitions int32
	var retention time.Duration
	var retentionBytes, maxBytes int64
	var policy string
	cmd := &cobra.Command{Use: "create NAME", Short: "Create a topic", Args: cobra.ExactArgs(1)}
	cmd.Flags().StringVar(&policy, "cleanup-policy", "delete", "delete (old segments go by retention), compact (the latest record per key is kept; every record needs a key) or compact,delete")
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 1, fmt.Sprintf("number of partitions (1 to %d)", maxPartitions))
	cmd.Flags().DurationVar(&retention, "retention", 0, "delete records older than this (default 168h; 0 keeps them forever)")
	cmd.Flags().Int64Var(&retentionBytes, "retention-bytes", 0, "per partition, delete the oldest segments beyond this size (0: no limit)")
	cmd.Flags().Int64Var(&maxBytes, "max-message-bytes", 0, fmt.Sprintf("largest record batch accepted (default 1 MiB; %d to %d)", minTopicMessageBytes, maxTopicMessageBytes))
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		fl := cmd.Flags()
		if err := firstErr(
			intRange("partitions", partitions, 1, maxPartitions),
			changed(fl, "retention", func() error {
				if retention < 0 {
					return fmt.Errorf("--retention %v: must not be negative (0 keeps records forever)", retention)
				}
				return nil
			}),
			intRange("retention-bytes", retentionBytes, 0, 1<<63-1),
			changed(fl, "max-message-bytes", func() error {
				return intRange("max-message-bytes", maxBytes, minTopicMessageBytes, maxTopicMessageBytes)
			}),
		); err != nil {
			return err
		}
		cp, err := parseCleanupPolicy(policy)
		if err != nil {
			return err
		}
		cfg := &client.TopicConfig{Partitions: partitions, RetentionBytes: retentionBytes, MaxMessageBytes: maxBytes, CleanupPolicy: cp}
		if cmd.Flags().Changed("retention") {
			cfg.Retention = durationpb.New(retention)
		}
		t, err := c.CreateTopic(ctx, args[0], cfg)
		if err != nil {
			return err
		}
		return printTopics(cmd, f, []*client.Topic{t})
	})
	return cmd
}

// parseCleanupPolicy reads --cleanup-policy, as Kafka spells the list.
func parseCleanupPolicy(v string) (sluicev1.CleanupPolicy, error) {
	var compact, del bool
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return 0, fmt.Errorf("--cleanup-policy %q: want delete, compact or compact,delete", v)
		}
	}
	switch {
	case compact && del:
		return sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT_DELETE, nil
	case compact:
		return sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT, nil
	}
	return sluicev1.CleanupPolicy_CLEANUP_POLICY_DELETE, nil
}

func printTopics(cmd *cobra.Command, f *clientFlags, ts []*client.Topic) error {
	if f.json() {
		return printJSON(cmd.OutOrStdout(), &sluicev1.ListTopicsResponse{Topics: ts})
	}
	rows := make([][]string, len(ts))
	for i, t := range ts {
		ret := "forever"
		if d := t.GetConfig().GetRetention().AsDuration(); d > 0 {
			ret = d.String()
		}
		rows[i] = []string{t.GetName(), strconv.Itoa(int(t.GetConfig().GetPartitions())), ret}
	}
	return table(cmd.OutOrStdout(), []string{"NAME", "PARTITIONS", "RETENTION"}, rows)
}

func topicListCmd(f *clientFlags) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{Use: "list", Short: "List topics", Args: cobra.NoArgs}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only topics whose name starts with this")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
		ts, err := c.ListTopics(ctx, prefix)
		if err != nil {
			return err
		}
		return printTopics(cmd, f, ts)
	})
	return cmd
}

func topicDescribeCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "describe NAME", Short: "Show a topic's partitions and subscriptions", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		t, err := c.DescribeTopic(ctx, args[0])
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), t)
		}
		var subs []string
		for _, s := range t.GetSubscriptions() {
			subs = append(subs, s.GetName())
		}
		fmt.Fprintf(cmd.OutOrStdout(), "topic %s, subscriptions: %s\n", t.GetName(), orDash(strings.Join(subs, ",")))
		rows := make([][]string, len(t.GetPartitions()))
		for i, p := range t.GetPartitions() {
			rows[i] = []string{strconv.Itoa(int(p.GetPartition())), strconv.FormatInt(p.GetLogStartOffset(), 10),
				strconv.FormatInt(p.GetHighWatermark(), 10), strconv.FormatInt(p.GetSizeBytes(), 10)}
		}
		return table(cmd.OutOrStdout(), []string{"PARTITION", "LOG START", "HIGH WATERMARK", "BYTES"}, rows)
	})
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func topicProduceCmd(f *clientFlags) *cobra.Command {
	var key string
	var partition int32
	var files []string
	cmd := &cobra.Command{
		Use:   "produce TOPIC [VALUE...]",
		Short: "Produce records: each argument, each --file, or else each non-empty line of stdin is one record's value",
		Example: `  sluice topic produce orders --key cust-1 '{"total":42}' '{"total":7}'
  sluice topic produce images --file cat.png      # one record, the whole file
  seq 100 | sluice topic produce numbers          # 100 records`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.Flags().StringVarP(&key, "key", "k", "", "record key (records of a key land in one partition, in order)")
	cmd.Flags().Int32Var(&partition, "partition", -1, "write to this partition instead of the key's")
	cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "produce this `file` whole as one record's value; - is stdin (repeatable)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if cmd.Flags().Changed("partition") {
			if err := intRange("partition", partition, 0, maxPartitions-1); err != nil {
				return err
			}
		}
		values, err := sendBodies(cmd, args[1:], files)
		if err != nil {
			return err
		}
		var results []*client.ProduceResult
		p := newProgress(cmd, "produced", int64(len(values)))
		for start := 0; start < len(values); start += 500 {
			var recs []*client.ProduceRecord
			for _, v := range values[start:min(start+500, len(values))] {
				r := &client.ProduceRecord{Value: v}
				if key != "" {
					r.Key = []byte(key)
				}
				if partition >= 0 {
					r.Partition = &partition
				}
				recs = append(recs, r)
			}
			res, err := c.Produce(ctx, args[0], recs, nil)
			if err != nil {
				p.done(int64(len(results)))
				return fmt.Errorf("after %d of %d produced: %w", len(results), len(values), err)
			}
			results = append(results, res...)
			p.update(int64(len(results)))
		}
		p.done(int64(len(results)))
		if f.json() {
			return printJSON(cmd.OutOrStdout(), &sluicev1.ProduceResponse{Results: results})
		}
		rows := make([][]string, len(results))
		for i, r := range results {
			rows[i] = []string{strconv.Itoa(int(r.GetPartition())), strconv.FormatInt(r.GetOffset(), 10)}
		}
		return table(cmd.OutOrStdout(), []string{"PARTITION", "OFFSET"}, rows)
	})
	return cmd
}
