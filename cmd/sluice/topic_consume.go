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
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// consumeOpts are `sluice topic consume`'s flags.
type consumeOpts struct {
	group     string
	fromStart bool
	follow    bool
	max       int
	wait      time.Duration
	quiet     bool
}

// followPoll is how long one fetch of --follow waits for records: long
// enough that an idle follow costs a request every few seconds, short
// enough that a server restart is noticed.
const followPoll = 5 * time.Second

func topicConsumeCmd(f *clientFlags) *cobra.Command {
	var o consumeOpts
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Read records from every partition: until -n records, nothing new for --wait, or with --follow until Ctrl-C",
		Long: `Read records from every partition of a topic. Without --group it reads from
the end (new records only) or, with --from-beginning, from the start. With
--group it continues from the group's committed offsets and commits what it
read, so the next run goes on from there (the group must have no members).

It stops after -n records, or when nothing arrives for --wait; with --follow
it goes on until Ctrl-C (or -n), printing records as they arrive (with
-o json, one JSON document per record and line) and, with --group,
committing after each batch it printed. -q prints only the values, raw.`,
		Example: `  sluice topic consume orders --from-beginning
  sluice topic consume orders --follow -q | jq .total
  sluice topic consume orders --group billing --follow`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVarP(&o.group, "group", "g", "", "consumer `group` whose committed offsets to continue from and commit")
	cmd.Flags().BoolVar(&o.fromStart, "from-beginning", false, "start at the earliest offset (where nothing is committed)")
	cmd.Flags().BoolVarP(&o.follow, "follow", "F", false, "keep reading new records until Ctrl-C")
	cmd.Flags().IntVarP(&o.max, "max", "n", 0, "stop after this many records (0: no limit)")
	cmd.Flags().DurationVar(&o.wait, "wait", time.Second, fmt.Sprintf("without --follow, stop when no record arrives for this long (at most %v)", maxFetchWait))
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "print only the values, as raw bytes, one per line")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		if err := firstErr(intRange("max", o.max, 0, 1<<31-1), durRange("wait", o.wait, 0, maxFetchWait)); err != nil {
			return err
		}
		if o.follow && cmd.Flags().Changed("wait") {
			return errors.New("--wait is for a bounded read; --follow reads until Ctrl-C (or -n)")
		}
		return consumeTopic(ctx, cmd, f, c, args[0], o)
	})
	return withFields(cmd, "max_wait=wait,max_records=max")
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
	if o.follow {
		p.silent = true // the records themselves show progress
	}
	var got []*client.Record
	n := 0
	for o.max == 0 || n < o.max {
		batch, err := fetchOnce(ctx, c, topic, pos, o, n)
		if o.follow && ctx.Err() != nil {
			return nil // Ctrl-C ends a follow; what was printed was committed
		}
		if err != nil {
			return err
		}
		n += len(batch)
		p.update(int64(n))
		if !o.follow {
			if len(batch) == 0 {
				break // nothing arrived within --wait
			}
			got = append(got, batch...)
			continue
		}
		if err := printFollowed(cmd, f, batch, o.quiet); err != nil {
			return err
		}
		if err := commitConsumed(ctx, c, topic, pos, o, len(batch)); err != nil {
			return err
		}
	}
	p.done(int64(n))
	if o.follow {
		return nil
	}
	if err := commitConsumed(ctx, c, topic, pos, o, len(got)); err != nil {
		return err
	}
	return printRecords(cmd, f, got, o.quiet)
}

// fetchOnce reads the next records of every partition and moves pos on.
func fetchOnce(ctx context.Context, c *client.Client, topic string, pos []*client.PartitionOffset, o consumeOpts, done int) ([]*client.Record, error) {
	wait := o.wait
	if o.follow {
		wait = followPoll
	}
	req := &client.FetchRequest{Topic: topic, Partitions: pos, MaxWait: durationpb.New(wait)}
	if o.max > 0 {
		req.MaxRecords = int32(o.max - done)
	}
	res, err := c.Fetch(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*client.Record
	for i, pr := range res.GetPartitions() {
		if e := pr.GetError(); e != nil {
			return nil, fmt.Errorf("partition %d: %s", pr.GetPartition(), e.GetReason())
		}
		out = append(out, pr.GetRecords()...)
		pos[i].Offset = pr.GetNextOffset()
	}
	return out, nil
}

// commitConsumed commits pos for --group once something was read.
func commitConsumed(ctx context.Context, c *client.Client, topic string, pos []*client.PartitionOffset, o consumeOpts, read int) error {
	if o.group == "" || read == 0 {
		return nil
	}
	var offs []*client.CommittedOffset
	for _, po := range pos {
		offs = append(offs, &client.CommittedOffset{Topic: topic, Partition: po.GetPartition(), Offset: po.GetOffset()})
	}
	// Generation -1 with no member: a tool's commit, which an empty group accepts.
	if err := c.CommitOffsets(ctx, o.group, "", -1, offs); err != nil {
		return fmt.Errorf("read %d records but could not commit: %w", read, err)
	}
	return nil
}

// printFollowed prints the records of one fetch of --follow, each on its
// own line, so that they show as they arrive.
func printFollowed(cmd *cobra.Command, f *clientFlags, recs []*client.Record, quiet bool) error {
	w := cmd.OutOrStdout()
	for _, r := range recs {
		var err error
		switch {
		case quiet:
			err = writeRaw(w, r.GetValue())
		case f.json():
			err = printJSON(w, r)
		default:
			_, err = fmt.Fprintln(w, strings.Join(recordRow(r), "  "))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeRaw writes a value byte for byte and a newline: -q is for pipes,
// where a quoted value would be a different value.
func writeRaw(w io.Writer, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err := w.Write([]byte{'\n'})
	return err
}

func recordRow(r *client.Record) []string {
	return []string{strconv.Itoa(int(r.GetPartition())), strconv.FormatInt(r.GetOffset(), 10),
		orDash(printable(r.GetKey())), printable(r.GetValue())}
}

func printRecords(cmd *cobra.Command, f *clientFlags, recs []*client.Record, quiet bool) error {
	w := cmd.OutOrStdout()
	switch {
	case quiet:
		for _, r := range recs {
			if err := writeRaw(w, r.GetValue()); err != nil {
				return err
			}
		}
		return nil
	case f.json():
		list, err := protoList(recs)
		if err != nil {
			return err
		}
		return printJSONObject(w, "records", list)
	}
	rows := make([][]string, len(recs))
	for i, r := range recs {
		rows[i] = recordRow(r)
	}
	return table(w, []string{"PARTITION", "OFFSET", "KEY", "VALUE"}, rows)
}
