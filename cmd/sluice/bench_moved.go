package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newBenchMovedCmd) }

// newBenchMovedCmd answers the `sluice bench` of older docs and scripts:
// the load generator is the sluice-bench binary now (same workloads and
// flags), so that `sluice serve` links neither the AWS SDK nor franz-go.
func newBenchMovedCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "bench",
		Short:              "Moved to the sluice-bench binary",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("bench is its own binary now, with the same workloads and flags: " +
				"go build ./cmd/sluice-bench, then sluice-bench produce|consume|queue|latency [flags]")
		},
	}
}
