// Command sluice-bench generates load against a running sluice over the
// native API, the Kafka protocol or the SQS API, and reports msgs/s, MB/s
// and latency quantiles beside the disk's own limits (docs/benchmarks.md).
//
//	sluice-bench produce --protocol kafka --size 1024 --in-flight 256 --duration 10s
//
// It is a binary of its own, not a `sluice` subcommand, so that the serving
// binary links neither the AWS SDK nor franz-go's client: deps_test.go
// checks that `go list -deps ./cmd/sluice` holds neither. This package owns
// the flags and the three protocol drivers of bench/compare/load; it must
// never be imported by the broker's packages.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newBenchCmd().Execute(); err != nil {
		// One line, so scripts can show it as is.
		fmt.Fprintln(os.Stderr, "sluice-bench:", err)
		os.Exit(1)
	}
}
