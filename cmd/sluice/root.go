package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// subcommands holds one constructor per subcommand file (serve.go, and later
// queue.go, topic.go, …). Each file appends its own in init(), so adding a
// subcommand is adding a file: parallel work on different subcommands never
// edits the same list.
var subcommands []func() *cobra.Command

// newRootCmd builds a fresh command tree; tests build one per case so flag
// state never leaks between them.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "A durable work queue and a Kafka-style log in one binary",
		Long: `sluice is a message broker in one binary: a durable work queue (visibility
timeouts, receipts, dead letters, delays, FIFO groups) and a partitioned log
(offsets, consumer groups, replay), with every acknowledged message on disk.

Start a broker with "sluice serve"; every serve flag also reads an
environment variable SLUICE_<FLAG> (e.g. SLUICE_DATA_DIR) and a YAML file.`,
		SilenceUsage:  true, // an error is one line, not the usage text
		SilenceErrors: true, // main prints it, prefixed "sluice:"
	}
	// "sluice completion bash|zsh|fish|powershell" is cobra's, listed in
	// --help so that people find it.
	root.Version = versionString()
	root.SetVersionTemplate("sluice {{.Version}}\n")
	root.AddCommand(newVersionCmd())
	for _, newCmd := range subcommands {
		root.AddCommand(newCmd())
	}
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the build it comes from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "sluice", versionString())
			return err
		},
	}
}
