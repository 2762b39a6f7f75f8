// Command peerbench is bench/compare's harness: it runs the load engine of
// `sluice-bench` against a peer broker through that peer's own Go client,
// reads a broker's resident memory from /proc, probes the disk, and turns
// a run's JSON files into the Markdown report. run.sh drives it; it is not
// run by `go test`.
//
//	peerbench run --peer redis --addr 127.0.0.1:6399 --workload produce …
//	peerbench mem --pid 1234
//	peerbench probe --dir /tmp/x
//	peerbench report --dir bench/compare/results/2026-11-30
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/bench/compare/load"
	"github.com/sluice-mq/sluice/bench/compare/peers"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peerbench run|mem|probe|report [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(ctx, os.Args[2:])
	case "mem":
		err = memCmd(os.Args[2:])
	case "probe":
		err = probeCmd(os.Args[2:])
	case "report":
		err = reportCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

// report is what run prints: the same shape as `sluice-bench -o json`.
type report struct {
	Result load.Result `json:"result"`
	Disk   *load.Disk  `json:"disk,omitempty"`
}

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var c load.Config
	var o peers.Options
	peer := fs.String("peer", "", "nats, rabbitmq, redis or postgres")
	label := fs.String("label", "", "target name in the report")
	fs.StringVar(&o.Addr, "addr", "", "peer host:port")
	fs.StringVar(&o.RabbitQueueType, "rabbit-queue-type", "quorum", "quorum or classic")
	fs.StringVar(&c.Workload, "workload", "", "produce, consume, queue or latency")
	fs.StringVar(&c.Name, "name", "", "destination (recreated)")
	fs.IntVar(&c.Size, "size", 1024, "message bytes")
	fs.Int64Var(&c.Count, "count", 1_000_000, "at most this many messages")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "at most this long")
	fs.IntVar(&c.InFlight, "in-flight", 256, "messages outstanding")
	fs.IntVar(&c.Batch, "batch", 1, "messages per send call")
	fs.IntVar(&c.Consumers, "consumers", 4, "consumer clients")
	fs.IntVar(&c.Prefetch, "prefetch", 64, "unacked per consumer")
	fs.IntVar(&c.Rate, "rate", 5000, "messages per second (latency)")
	fs.BoolVar(&c.Queue, "queue", false, "produce/consume use a queue")
	quiet := fs.Bool("quiet", false, "no progress line")
	fs.Parse(args)
	if c.Count <= 0 || c.Duration <= 0 {
		return fmt.Errorf("--count and --duration must be positive: every run is bounded")
	}
	c.Defaults()
	if !*quiet {
		c.Progress = os.Stderr
	}
	o.Consumers, o.Prefetch, o.InFlight = c.Consumers, c.Prefetch, c.InFlight
	d, err := peers.Open(ctx, *peer, o)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := load.Run(ctx, d, c)
	res.Target = *label
	if err != nil {
		return fmt.Errorf("%s on %s: %w", c.Workload, *peer, err)
	}
	return printJSON(report{Result: res})
}

func probeCmd(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	dir := fs.String("dir", os.TempDir(), "folder on the disk to measure")
	d := fs.Duration("time", 2*time.Second, "length of each probe")
	fs.Parse(args)
	disk, err := load.ProbeDisk(*dir, *d)
	if err != nil {
		return err
	}
	return printJSON(disk)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
