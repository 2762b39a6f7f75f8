package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

func topicDeleteCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete TOPIC",
		Short: "Delete a topic with its records, subscriptions and committed offsets",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if err := c.DeleteTopic(ctx, args[0]); err != nil {
			return err
		}
		if f.json() {
			return printJSONObject(cmd.OutOrStdout(), "deleted", args[0])
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
		return err
	})
	return cmd
}

func topicAddPartitionsCmd(f *clientFlags) *cobra.Command {
	var total int32
	cmd := &cobra.Command{
		Use:   "add-partitions TOPIC --partitions N",
		Short: "Raise a topic's partition count to N (a topic never shrinks; keys may move to new partitions)",
		Args:  cobra.ExactArgs(1),
	}
	cmd.Flags().Int32VarP(&total, "partitions", "p", 0, fmt.Sprintf("the new total number of partitions (more than now, at most %d; required)", maxPartitions))
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if !cmd.Flags().Changed("partitions") {
			return errors.New("--partitions is required: the new total, e.g. --partitions 6")
		}
		if err := intRange("partitions", total, 2, maxPartitions); err != nil {
			return err
		}
		t, err := c.AddPartitions(ctx, args[0], total)
		if err != nil {
			return err
		}
		return printTopics(cmd, f, []*client.Topic{t})
	})
	return cmd
}

func topicOffsetsCmd(f *clientFlags) *cobra.Command {
	var earliest bool
	var at string
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "offsets TOPIC [--earliest | --time TIME]",
		Short: "Show each partition's latest offset (the next one written), its earliest, or the first at a time",
		Args:  cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&earliest, "earliest", false, "the first offset still stored, instead of the latest")
	cmd.Flags().StringVar(&at, "time", "", "the first offset whose record is at or after this RFC 3339 `time`")
	cmd.Flags().Int32SliceVar(&partitions, "partitions", nil, "only these partitions (default all)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		req := &client.ListOffsetsRequest{Topic: args[0], Partitions: partitions, Spec: &sluicev1.ListOffsetsRequest_Latest{Latest: true}}
		switch {
		case earliest && at != "":
			return errors.New("give --earliest or --time, not both")
		case earliest:
			req.Spec = &sluicev1.ListOffsetsRequest_Earliest{Earliest: true}
		case at != "":
			t, err := time.Parse(time.RFC3339, at)
			if err != nil {
				return errors.New("--time: want an RFC 3339 time such as 2026-11-29T00:00:00Z")
			}
			req.Spec = &sluicev1.ListOffsetsRequest_Time{Time: timestamppb.New(t)}
		}
		offs, err := c.ListOffsets(ctx, req)
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), &sluicev1.ListOffsetsResponse{Partitions: offs})
		}
		rows := make([][]string, len(offs))
		for i, o := range offs {
			ts := "-"
			if o.GetTimestamp() != nil {
				ts = o.GetTimestamp().AsTime().UTC().Format(time.RFC3339Nano)
			}
			rows[i] = []string{strconv.Itoa(int(o.GetPartition())), strconv.FormatInt(o.GetOffset(), 10), ts}
		}
		return table(cmd.OutOrStdout(), []string{"PARTITION", "OFFSET", "TIMESTAMP"}, rows)
	})
	return cmd
}
