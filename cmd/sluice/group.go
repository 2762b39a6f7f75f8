package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

func init() { subcommands = append(subcommands, newGroupCmd) }

func newGroupCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("group", "Inspect consumer groups and move their offsets", f)
	cmd.AddCommand(groupListCmd(f), groupDescribeCmd(f), groupResetCmd(f))
	return cmd
}

func lower(enum, prefix string) string { return strings.ToLower(strings.TrimPrefix(enum, prefix)) }

func groupListCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List consumer groups", Args: cobra.NoArgs}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
		gs, err := c.ListGroups(ctx)
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), &sluicev1.ListGroupsResponse{Groups: gs})
		}
		rows := make([][]string, len(gs))
		for i, g := range gs {
			rows[i] = []string{g.GetGroup(), lower(g.GetState().String(), "GROUP_STATE_"),
				lower(g.GetProtocol().String(), "GROUP_PROTOCOL_"), strconv.Itoa(int(g.GetMembers()))}
		}
		return table(cmd.OutOrStdout(), []string{"GROUP", "STATE", "PROTOCOL", "MEMBERS"}, rows)
	})
	return cmd
}

func groupDescribeCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "describe GROUP", Short: "Show a group's members, offsets and lag", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		d, err := c.DescribeGroup(ctx, args[0])
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), d)
		}
		if err := describeGroupMembers(cmd.OutOrStdout(), d); err != nil {
			return err
		}
		rows := make([][]string, len(d.GetPartitions()))
		for i, p := range d.GetPartitions() {
			committed, lag, lagTime := "-", "-", "-" // nothing committed: no lag to speak of, as Kafka's tools show it
			if p.GetCommittedOffset() >= 0 {
				committed, lag, lagTime = strconv.FormatInt(p.GetCommittedOffset(), 10), strconv.FormatInt(p.GetLagMessages(), 10), fmtDur(p.GetLag().AsDuration())
			}
			rows[i] = []string{p.GetTopic(), strconv.Itoa(int(p.GetPartition())), committed,
				strconv.FormatInt(p.GetHighWatermark(), 10), lag, lagTime, orDash(p.GetMemberId())}
		}
		return table(cmd.OutOrStdout(), []string{"TOPIC", "PARTITION", "COMMITTED", "HIGH WATERMARK", "LAG", "LAG TIME", "MEMBER"}, rows)
	})
	return cmd
}

func groupResetCmd(f *clientFlags) *cobra.Command {
	var topic, datetime string
	var earliest, latest, dryRun, create bool
	var offset int64
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic TOPIC (--to-earliest | --to-latest | --to-offset N | --to-datetime TIME)",
		Short: "Move an inactive group's committed offsets (replay or skip)",
		Args:  cobra.ExactArgs(1),
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic whose offsets to move (required)")
	cmd.Flags().BoolVar(&earliest, "to-earliest", false, "to the first offset still stored")
	cmd.Flags().BoolVar(&latest, "to-latest", false, "to the end: skip everything")
	cmd.Flags().Int64Var(&offset, "to-offset", 0, "to this offset in every partition (clamped to the log)")
	cmd.Flags().StringVar(&datetime, "to-datetime", "", "to the first record at or after this RFC 3339 `time`, e.g. 2026-11-29T00:00:00Z")
	cmd.Flags().Int32SliceVar(&partitions, "partitions", nil, "only these partitions (default all)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the new offsets without committing them")
	cmd.Flags().BoolVar(&create, "create", false, "the group may be new: position it before its first consumer starts")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if topic == "" {
			return errors.New("--topic is required: the topic whose offsets to move")
		}
		if cmd.Flags().Changed("to-offset") && offset < 0 {
			return fmt.Errorf("--to-offset %d: must not be negative", offset)
		}
		req := &client.ResetOffsetsRequest{Group: args[0], Topic: topic, Partitions: partitions, DryRun: dryRun}
		n := 0
		if earliest {
			req.To, n = &sluicev1.ResetOffsetsRequest_Earliest{Earliest: true}, n+1
		}
		if latest {
			req.To, n = &sluicev1.ResetOffsetsRequest_Latest{Latest: true}, n+1
		}
		if cmd.Flags().Changed("to-offset") {
			req.To, n = &sluicev1.ResetOffsetsRequest_Offset{Offset: offset}, n+1
		}
		if datetime != "" {
			t, err := time.Parse(time.RFC3339, datetime)
			if err != nil {
				return errors.New("--to-datetime: want an RFC 3339 time such as 2026-11-29T00:00:00Z")
			}
			req.To, n = &sluicev1.ResetOffsetsRequest_Time{Time: timestamppb.New(t)}, n+1
		}
		if n != 1 {
			return errors.New("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
		}
		// Committing offsets creates a group, so a typo in its name would
		// make a new group instead of moving the one meant: only --create
		// may do that.
		if !create {
			if _, err := c.DescribeGroup(ctx, args[0]); err != nil {
				if errors.Is(err, client.ErrGroupNotFound) {
					return fmt.Errorf("group %s does not exist (`sluice group list` shows the groups; pass --create to position a new group)", args[0])
				}
				return err
			}
		}
		offs, err := c.ResetOffsets(ctx, req)
		if err != nil {
			return err
		}
		if f.json() {
			return printJSON(cmd.OutOrStdout(), &sluicev1.ResetOffsetsResponse{Offsets: offs})
		}
		rows := make([][]string, len(offs))
		for i, o := range offs {
			rows[i] = []string{o.GetTopic(), strconv.Itoa(int(o.GetPartition())), strconv.FormatInt(o.GetOffset(), 10)}
		}
		return table(cmd.OutOrStdout(), []string{"TOPIC", "PARTITION", "NEW OFFSET"}, rows)
	})
	return cmd
}

// describeGroupMembers prints the group's protocol and epochs, then its
// members with their assignments: for a KIP-848 consumer group also each
// member's epoch, its target and what it must still release.
func describeGroupMembers(w io.Writer, d *sluicev1.DescribeGroupResponse) error {
	sum := d.GetSummary()
	proto := lower(sum.GetProtocol().String(), "GROUP_PROTOCOL_")
	consumer := sum.GetProtocol() == sluicev1.GroupProtocol_GROUP_PROTOCOL_KAFKA_CONSUMER
	line := fmt.Sprintf("protocol %s, protocol type %s, state %s, ", proto, orDash(d.GetProtocolType()), lower(sum.GetState().String(), "GROUP_STATE_"))
	if consumer {
		line += fmt.Sprintf("group epoch %d, assignment epoch %d, assignor %s", d.GetGroupEpoch(), d.GetAssignmentEpoch(), orDash(d.GetAssignor()))
	} else {
		line += fmt.Sprintf("generation %d", d.GetGeneration())
	}
	if _, err := fmt.Fprintln(w, line); err != nil {
		return err
	}
	if len(d.GetMembers()) == 0 {
		return nil
	}
	header := []string{"MEMBER", "CLIENT", "ASSIGNED"}
	if consumer {
		header = append(header, "EPOCH", "TARGET", "REVOKING", "INSTANCE")
	}
	rows := make([][]string, len(d.GetMembers()))
	for i, m := range d.GetMembers() {
		rows[i] = []string{m.GetMemberId(), orDash(m.GetClientId()), fmtTPs(m.GetAssignment())}
		if consumer {
			rows[i] = append(rows[i], strconv.Itoa(int(m.GetMemberEpoch())), fmtTPs(m.GetTargetAssignment()),
				fmtTPs(m.GetRevoking()), orDash(m.GetInstanceId()))
		}
	}
	if err := table(w, header, rows); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// fmtTPs prints partitions as topic:0,1,2 topic2:0 ("-" for none).
func fmtTPs(tps []*sluicev1.TopicPartitions) string {
	var parts []string
	for _, tp := range tps {
		ps := make([]string, len(tp.GetPartitions()))
		for i, p := range tp.GetPartitions() {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, tp.GetTopic()+":"+strings.Join(ps, ","))
	}
	return orDash(strings.Join(parts, " "))
}
