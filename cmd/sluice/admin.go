package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/node"
)

func init() { subcommands = append(subcommands, newAdminCmd) }

func newAdminCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("admin", "The operator's reports: what storage found damaged, the node's disk and fsync health", f)
	cmd.AddCommand(adminCorruptionCmd(f), adminNodeCmd(f), adminUsersCmd(f))
	return cmd
}

func adminCorruptionCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "corruption",
		Short: "List the damaged batches storage quarantined (their offsets are skipped) and the queues that could not open",
		Long: `List what the broker's storage found damaged: every batch whose checksum or
framing was wrong when it was read or scrubbed, quarantined so that readers skip
its offsets (a Kafka consumer sees a gap, a queue counts the messages as lost),
with where it was and when it was found; and the queues that could not be opened
at start. docs/operations.md ("Corruption") says what to do about each.`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, _ []string) error {
		rep, err := fetchCorruption(ctx, f)
		if err != nil {
			return err
		}
		if f.json() {
			enc := json.NewEncoder(cmd.OutOrStdout())
			return enc.Encode(rep)
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "%d damaged batches found since the broker started; %d recorded:\n", rep.CorruptBatchesTotal, len(rep.Batches))
		rows := make([][]string, len(rep.Batches))
		for i, b := range rep.Batches {
			offsets := "-"
			if b.LastOffset >= b.FirstOffset {
				offsets = strconv.FormatInt(b.FirstOffset, 10) + "-" + strconv.FormatInt(b.LastOffset, 10)
			}
			rows[i] = []string{b.Owner, offsets, strconv.FormatInt(b.Length, 10), b.Found.Local().Format(time.DateTime),
				b.Segment + "@" + strconv.FormatInt(b.Position, 10), b.Reason}
		}
		if err := table(out, []string{"LOG", "OFFSETS", "BYTES", "FOUND", "WHERE", "WHY"}, rows); err != nil {
			return err
		}
		if len(rep.Unavailable) > 0 {
			fmt.Fprintf(out, "queues that could not be opened (see the server log; DeleteQueue removes one): %s\n",
				strings.Join(rep.Unavailable, ", "))
		}
		return nil
	})
	return cmd
}

func fetchCorruption(ctx context.Context, f *clientFlags) (*node.CorruptionReport, error) {
	var rep node.CorruptionReport
	if err := adminCall(ctx, f, f.server, "GET", node.CorruptionPath, nil, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", node.CorruptionPath, err)
	}
	return &rep, nil
}

func adminNodeCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Show the node's disk headroom, open files and fdatasync latency since it started",
		Long: `Show the health of the node the command talks to: the free and total space of
the file system under its data directory, whether the disk refuses writes (full or
failing: the broker refuses sends then, acks still work), its open log files
against the limit, and fdatasync latency since the process started (count, mean,
and p50/p99 estimated from the histogram's buckets, as coarse as a factor of two;
/metrics has the histogram itself).`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, _ []string) error {
		var rep node.NodeReport
		if err := adminCall(ctx, f, f.server, "GET", node.NodePath, nil, &rep); err != nil {
			return fmt.Errorf("%s: %w", node.NodePath, err)
		}
		if f.json() {
			return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
		}
		out := cmd.OutOrStdout()
		disk := "unknown"
		if rep.DiskSizeBytes > 0 {
			disk = fmt.Sprintf("%s free of %s (%.1f %%)", bytesText(rep.DiskFreeBytes), bytesText(rep.DiskSizeBytes),
				100*float64(rep.DiskFreeBytes)/float64(rep.DiskSizeBytes))
		}
		writes := "accepted"
		if rep.WriteFailure != "" {
			writes = "REFUSED: " + rep.WriteFailure
		}
		fs := rep.Fsync
		return table(out, []string{"WHAT", "VALUE"}, [][]string{
			{"data directory", rep.DataDir},
			{"disk", disk},
			{"writes", writes},
			{"open files", fmt.Sprintf("%d of %d", rep.OpenFiles, rep.MaxOpenFiles)},
			{"fdatasyncs", strconv.FormatUint(fs.Count, 10)},
			{"fdatasync mean / p50 / p99", fmt.Sprintf("%s / %s / %s", secondsText(fs.MeanSeconds), secondsText(fs.P50Seconds), secondsText(fs.P99Seconds))},
		})
	})
	return cmd
}

func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func secondsText(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

func adminUsersCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Show the users and access rules the server enforces now (never a secret)",
		Long: `Show what the running server enforces: the users of its --auth-file, which
kinds of credentials each has (password for Kafka SASL, bearer tokens for the
native API, SQS access key ids), and the access rules. It asks the server, so it
shows the file as last reloaded; "sluice user list --auth-file F" reads the file.`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, _ []string) error {
		var rep node.UsersReport
		if err := adminCall(ctx, f, f.server, "GET", node.UsersPath, nil, &rep); err != nil {
			return fmt.Errorf("%s: %w", node.UsersPath, err)
		}
		if f.json() {
			return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "from %s:\n", rep.AuthFile)
		rows := make([][]string, len(rep.Users))
		for i, u := range rep.Users {
			rows[i] = []string{u.Name, u.Password, strconv.Itoa(u.Tokens), orDash(strings.Join(u.AccessKeyIDs, ","))}
		}
		if err := table(out, []string{"USER", "PASSWORD", "TOKENS", "ACCESS KEYS"}, rows); err != nil {
			return err
		}
		rows = make([][]string, len(rep.Rules))
		for i, r := range rep.Rules {
			rows[i] = []string{r.User, orDash(strings.Join(r.Allow, ",")), orDash(strings.Join(r.Deny, ",")), strings.Join(r.Resources, ","), orDash(r.Label)}
		}
		fmt.Fprintln(out)
		return table(out, []string{"RULE FOR", "ALLOW", "DENY", "RESOURCES", "LABEL"}, rows)
	})
	return cmd
}
