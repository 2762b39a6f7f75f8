// Command sluice is the sluice message broker: a durable work queue and a
// Kafka-style log in one binary. `sluice serve` runs the broker; the other
// subcommands are clients of a running broker. The load generator is a
// binary of its own, cmd/sluice-bench, so that this one links no client
// library of another protocol (deps_test.go).
//
// This package owns flag and config-file parsing and the command tree. It
// must never hold broker or protocol logic: serve hands a server.Config to
// internal/node, which assembles the node, and client subcommands go
// through the public Go client.
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
