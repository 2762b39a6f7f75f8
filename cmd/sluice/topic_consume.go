package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// consumeOpts are `sluice topic consume`'s flags.
type consumeOpts struct {
	group     string
	fromStart bool
	max       int
	wait      time.Duration
	quiet     bool
}

func topicConsumeCmd(f *clientFlags) *cobra.Command {
	var o consumeOpts
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Read records from every partition until -n records or nothing arrives for --wait",
		Long: `Read records from every partition of a topic. Without --group it reads from
the end (new records only) or, with --from-beginning, from the start. With
--group it continues from the group's committed offsets and commits what it
read, so the next run goes on from there (the group must have no members).`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVarP(&o.group, "group", "g", "", "consumer `group` whose committed offsets to continue from and commit")
	cmd.Flags().BoolVar(&o.fromStart, "from-beginning", false, "start at the earliest offset (where nothing is committed)")
	cmd.Flags().IntVarP(&o.max, "max", "n", 0, "stop after this many records (0: until --wait passes without records)")
	cmd.Flags().DurationVar(&o.wait, "wait", time.Second, "stop when no record arrives for this long (at most 30s)")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "print only the values, one per line")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		return consumeTopic(ctx, cmd, f, c, args[0], o)
	})
	return cmd
}

// startOffsets finds where to read each partition: the group's commit,
// else the earliest or latest offset.
func startOffsets(ctx context.Context, c *client.Client, topic string, o consumeOpts) ([]*client.PartitionOffset, error) {
	spec := &sluicev1.ListOffsetsRequest{Topic: topic, Spec: &sluicev1.ListOffsetsRequest_Latest{Latest: true}}
	if o.fromStart || o.group != "" {
		spec.Spec = &sluicev1.ListOffsetsRequest_Earliest{Earliest: true}
	}
	ends, err := c.ListOffsets(ctx, spec)
	if err != nil {
		return nil, err
	}
	committed := map[int32]int64{}
	if o.group != "" {
		offs, err := c.FetchOffsets(ctx, o.group, nil)
		if err != nil {
			return nil, err
		}
		for _, co := range offs {
			if co.GetTopic() == topic && co.GetOffset() >= 0 {
				committed[co.GetPartition()] = co.GetOffset()
			}
		}
	}
	pos := make([]*client.PartitionOffset, len(ends))
	for i, e := range ends {
		pos[i] = &client.PartitionOffset{Partition: e.GetPartition(), Offset: e.GetOffset()}
		if off, ok := committed[e.GetPartition()]; ok {
			pos[i].Offset = off
		}
	}
	return pos, nil
}

func consumeTopic(ctx context.Context, cmd *cobra.Command, f *clientFlags, c *client.Client, topic string, o consumeOpts) error {
	pos, err := startOffsets(ctx, c, topic, o)
	if err != nil {
		return err
	}
	total := int64(-1)
	if o.max > 0 {
		total = int64(o.max)
	}
	p := newProgress(cmd, "consumed", total)
	var got []*client.Record
	for o.max == 0 || len(got) < o.max {
		req := &client.FetchRequest{Topic: topic, Partitions: pos, MaxWait: durationpb.New(o.wait)}
		if o.max > 0 {
			req.MaxRecords = int32(o.max - len(got))
		}
		res, err := c.Fetch(ctx, req)
		if err != nil {
			return err
		}
		n := 0
		for i, pr := range res.GetPartitions() {
			if e := pr.GetError(); e != nil {
				return fmt.Errorf("partition %d: %s", pr.GetPartition(), e.GetReason())
			}
			got = append(got, pr.GetRecords()...)
			n += len(pr.GetRecords())
			pos[i].Offset = pr.GetNextOffset()
		}
		p.update(int64(len(got)))
		if n == 0 {
			break // nothing arrived within --wait
		}
	}
	p.done(int64(len(got)))
	if o.group != "" && len(got) > 0 {
		var offs []*client.CommittedOffset
		for _, po := range pos {
			offs = append(offs, &client.CommittedOffset{Topic: topic, Partition: po.GetPartition(), Offset: po.GetOffset()})
		}
		// Generation -1 with no member: a tool's commit, which an empty group accepts.
		if err := c.CommitOffsets(ctx, o.group, "", -1, offs); err != nil {
			return fmt.Errorf("read %d records but could not commit: %w", len(got), err)
		}
	}
	return printRecords(cmd, f, got, o.quiet)
}

func printRecords(cmd *cobra.Command, f *clientFlags, recs []*client.Record, quiet bool) error {
	w := cmd.OutOrStdout()
	switch {
	case quiet:
		for _, r := range recs {
			fmt.Fprintln(w, printable(r.GetValue()))
		}
		return nil
	case f.json():
		return printJSON(w, &sluicev1.PartitionRecords{Records: recs})
	}
	rows := make([][]string, len(recs))
	for i, r := range recs {
		rows[i] = []string{strconv.Itoa(int(r.GetPartition())), strconv.FormatInt(r.GetOffset(), 10),
			orDash(printable(r.GetKey())), printable(r.GetValue())}
	}
	return table(w, []string{"PARTITION", "OFFSET", "KEY", "VALUE"}, rows)
}
