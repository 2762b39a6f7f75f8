package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

func queueSendCmd(f *clientFlags) *cobra.Command {
	var groupID, dedupID string
	var delay time.Duration
	var attrs, files []string
	cmd := &cobra.Command{
		Use:   "send QUEUE [BODY...]",
		Short: "Send messages: each argument, each --file, or else each non-empty line of stdin is one message",
		Long: `Send messages to a queue. Each BODY argument is one message; or each --file
is one message, sent byte for byte (--file - reads all of stdin as one
message); or else each line of stdin is one message, where empty lines are
skipped (and counted on stderr). Messages go in batches of 100, each batch
durable before the next is sent.`,
		Example: `  sluice queue send jobs hello world          # two messages
  sluice queue send jobs --file report.pdf     # one message, the whole file
  tar c dir | sluice queue send jobs --file -  # one message, all of stdin
  seq 1000 | sluice queue send jobs            # 1000 messages, one per line`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.Flags().StringVar(&groupID, "group-id", "", "FIFO message group")
	cmd.Flags().StringVar(&dedupID, "dedup-id", "", "FIFO deduplication id (only with a single message)")
	cmd.Flags().DurationVar(&delay, "delay", 0, "keep the messages invisible this long (0 to the queue's retention)")
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "string attribute `name=value` (repeatable)")
	cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "send this `file` whole as one message; - is stdin (repeatable)")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		bodies, err := sendBodies(cmd, args[1:], files)
		if err != nil {
			return err
		}
		if dedupID != "" && len(bodies) != 1 {
			return fmt.Errorf("--dedup-id names one message, and this would send %d: send them one at a time, each with its own id", len(bodies))
		}
		if cmd.Flags().Changed("delay") && delay < 0 {
			return fmt.Errorf("--delay %v: must not be negative", delay)
		}
		var opts []client.SendOption
		for _, a := range attrs {
			k, v, ok := strings.Cut(a, "=")
			if !ok || k == "" {
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
	return withFields(cmd, "group_id=group-id,deduplication_id=dedup-id")
}

// sendBodies gathers what send sends: the arguments, the files, or the
// lines of stdin.
func sendBodies(cmd *cobra.Command, args, files []string) ([][]byte, error) {
	switch {
	case len(files) > 0 && len(args) > 0:
		return nil, errors.New("give bodies as arguments or with --file, not both")
	case len(files) > 0:
		var out [][]byte
		for _, name := range files {
			b, err := readFile(cmd, name)
			if err != nil {
				return nil, fmt.Errorf("--file %s: %w", name, err)
			}
			out = append(out, b)
		}
		return out, nil
	}
	ls, skipped, err := lines(args, cmd.InOrStdin())
	if skipped > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "skipped %d empty lines of stdin (send a file whole with --file)\n", skipped)
	}
	out := make([][]byte, len(ls))
	for i, l := range ls {
		out[i] = []byte(l)
	}
	if err == nil && len(out) == 0 {
		err = errors.New("nothing to send: give bodies as arguments, --file, or lines on stdin")
	}
	return out, err
}

// readFile reads a whole file, or stdin for "-".
func readFile(cmd *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(name)
}

// sendAll sends bodies in batches, showing progress on stderr.
func sendAll(ctx context.Context, cmd *cobra.Command, f *clientFlags, c *client.Client, queue string, bodies [][]byte, opts []client.SendOption) error {
	var results []*client.SendResult
	p := newProgress(cmd, "sent", int64(len(bodies)))
	for start := 0; start < len(bodies); start += maxSendBatch {
		batch := make([]*client.SendEntry, 0, maxSendBatch)
		for _, b := range bodies[start:min(start+maxSendBatch, len(bodies))] {
			batch = append(batch, client.Entry(b, opts...))
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
