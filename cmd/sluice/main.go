// Command sluice is the sluice message broker: a durable work queue and a
// Kafka-style log in one binary. `sluice serve` runs the broker; the other
// subcommands are clients of a running broker.
//
// This package owns flag and config-file parsing and the command tree. It
// must never hold broker or protocol logic: serve hands a server.Config to
// internal/server, and client subcommands go through the public Go client.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		// One line, so scripts can show it as is; cobra's own printing is off.
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
