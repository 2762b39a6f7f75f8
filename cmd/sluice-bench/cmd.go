package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// defaultServer is where the native API is looked for without --server
// or SLUICE_SERVER: `sluice serve`'s default HTTP address.
const defaultServer = "http://127.0.0.1:8080"

// benchFlags are sluice-bench's settings.
type benchFlags struct {
	cfg        load.Config
	protocol   string
	server     string // native API URL
	kafkaAddr  string
	kafkaSASL  kafkaSASL
	sqsURL     string
	partitions int
	// kafkaProducers is --kafka-producers: franz-go producer clients the senders share.
	kafkaProducers int
	replicas       int
	output         string
	probeDir       string
	probeTime      time.Duration
	quiet          bool
	gzip           bool
	unary          bool   // native: unary calls instead of the streams
	batches        bool   // native: the Publisher sends record batches it built
	sqsRawSend     bool   // sqs: single sends as bare HTTP POSTs, not through the SDK
	kafkaTxn       bool   // kafka: every send call is one committed transaction
	tlsCA          string // PEM CA to trust: connect over TLS
}

// benchReport is what --output json prints.
type benchReport struct {
	Result load.Result `json:"result"`
	Disk   *load.Disk  `json:"disk,omitempty"`
}

func newBenchCmd() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "sluice-bench produce|consume|queue|latency",
		Short: "Generate load against a running broker and report throughput and latency",
		// One line per error, printed by main; cobra's own printing is off.
		SilenceUsage:  true,
		SilenceErrors: true,
		ValidArgs:     []string{load.Produce, load.Consume, load.RoundTp, load.Latency},
		Args:          cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		Long: `Generate load against a running sluice and report msgs/s, MB/s and latency
quantiles (p50, p99, p99.9, max), with the disk's own limits beside them.

Workloads:
  produce  senders only: --in-flight messages outstanding, in calls of --batch;
           latency is from a send to its acknowledgement (durable per --fsync).
  consume  writes a backlog first (untimed), then times reading it back.
  queue    send, receive and ack at once (--consumers, --prefetch); each message
           is acked by itself; latency is from its send to the return of its ack.
  latency  sends --rate messages a second and measures each from when its send
           was DUE to its receipt, so a stall is charged to every message it
           delayed (no coordinated omission).

Every run stops at --count messages or --duration, whichever comes first.
--protocol picks the client: native (the Go client), kafka (franz-go; topics
read by partition, no per-message acks) or sqs (aws-sdk-go-v2, JSON protocol;
a queue stands in for the log; SQS returns at most 10 messages a receive, so
a consumer keeps --prefetch received with ceil(prefetch/10) long polls). The destination (--name) is deleted and
created afresh. Point --probe-dir at a folder on the broker's disk when the
broker runs on this machine; "" skips the disk probe.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.cfg.Workload = args[0]
			return f.run(cmd)
		},
	}
	fl := cmd.Flags()
	c := &f.cfg
	fl.StringVar(&f.protocol, "protocol", "native", "client `protocol`: native, kafka or sqs")
	server := defaultServer
	if v, ok := os.LookupEnv("SLUICE_SERVER"); ok && v != "" {
		server = v
	}
	fl.StringVar(&f.server, "server", server, "native API `URL` [env SLUICE_SERVER]")
	fl.StringVar(&f.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "Kafka listener `host:port`")
	fl.StringVar(&f.kafkaSASL.mechanism, "kafka-sasl-mechanism", "", "Kafka SASL `mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (\"\": none)")
	fl.StringVar(&f.kafkaSASL.user, "kafka-sasl-user", "", "Kafka SASL user `name`")
	fl.StringVar(&f.kafkaSASL.password, "kafka-sasl-password", "", "Kafka SASL `password` [env SLUICE_BENCH_KAFKA_PASSWORD]")
	fl.StringVar(&f.sqsURL, "sqs-url", "http://127.0.0.1:9324", "SQS endpoint `URL`")
	fl.IntVar(&c.Size, "size", 1024, "message size in `bytes` (at least 40)")
	fl.Int64Var(&c.Count, "count", 1_000_000, "stop after this many `messages`")
	fl.DurationVar(&c.Duration, "duration", 10*time.Second, "stop after this long")
	fl.IntVar(&c.InFlight, "in-flight", 256, "messages sent and not yet acknowledged, at most")
	fl.IntVar(&c.Batch, "batch", 1, "messages per send call")
	fl.IntVar(&c.Consumers, "consumers", 4, "receiving clients")
	fl.IntVar(&c.Prefetch, "prefetch", 64, "messages per receive / unacked per consumer")
	fl.IntVar(&c.Rate, "rate", 5000, "messages per second (latency)")
	fl.BoolVar(&c.Queue, "queue", false, "produce and consume use a queue instead of a topic (native)")
	fl.IntVar(&f.kafkaProducers, "kafka-producers", 1, "kafka: producer clients the senders share (sender i uses client i mod N), each an idempotent producer on its own connection")
	fl.BoolVar(&f.kafkaTxn, "kafka-transactional", false, "kafka: each sender is a transactional producer of its own (transactional id sluice-bench-PID-I) and each send call of --batch records one transaction: begin, produce, commit; latency is the whole transaction's")
	fl.IntVar(&f.partitions, "partitions", 1, "partitions of the topic (native, kafka)")
	fl.IntVar(&f.replicas, "replication-factor", 1, "replicas of each partition of the topic (kafka; above 1 needs a cluster)")
	fl.StringVar(&c.Name, "name", "", "queue or topic to use (default bench-<workload>); it is recreated")
	fl.StringVarP(&f.output, "output", "o", "table", "output `format`: table or json")
	fl.StringVar(&f.probeDir, "probe-dir", os.TempDir(), "measure the disk under this `folder` first (\"\" skips)")
	fl.DurationVar(&f.probeTime, "probe-time", time.Second, "length of each disk probe")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress line on stderr")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "PEM `file` of the CA to trust: connect over TLS (point --kafka-addr, --sqs-url https://, --server https:// at the TLS listeners)")
	fl.BoolVar(&f.batches, "native-batches", false, "native: the shared Publisher sends a topic's records as record batches it built (client.PublisherOptions.RecordBatches), which the server stores without decoding each record")
	fl.BoolVar(&f.unary, "native-unary", false, "native: one unary Produce/Send/SendBatch per send and AckBatch for acks, instead of a shared batching Publisher and acks on the Consume stream")
	fl.BoolVar(&f.sqsRawSend, "sqs-raw-send", false, "sqs: each single-message SendMessage as a bare HTTP POST of the JSON protocol (no SDK, no signature: for a server without --auth-file), to tell the SDK's CPU from the server's; receives and deletes still go through the SDK")
	fl.BoolVar(&f.gzip, "gzip", true, "native: accept gzip-compressed responses (the Go client's default)")
	return cmd
}

func (f *benchFlags) run(cmd *cobra.Command) error {
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("--output: want table or json, got %q", f.output)
	}
	if f.cfg.Count <= 0 || f.cfg.Duration <= 0 || f.cfg.Duration > 24*time.Hour {
		return fmt.Errorf("--count must be positive and --duration within (0, 24h]: every run is bounded")
	}
	f.cfg.Defaults()
	if err := f.cfg.Validate(); err != nil {
		return err
	}
	if !f.quiet {
		f.cfg.Progress = cmd.ErrOrStderr()
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := benchReport{}
	if f.probeDir != "" {
		d, err := load.ProbeDisk(f.probeDir, f.probeTime)
		if err != nil {
			return fmt.Errorf("disk probe: %w", err)
		}
		rep.Disk = &d
	}
	d, err := f.driver(ctx)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := load.Run(ctx, d, f.cfg)
	res.Target = "sluice/" + f.protocol
	rep.Result = res
	if err != nil {
		return fmt.Errorf("%s over %s: %w", f.cfg.Workload, f.protocol, err)
	}
	return f.print(cmd.OutOrStdout(), rep)
}

func (f *benchFlags) driver(ctx context.Context) (load.Driver, error) {
	if f.replicas < 1 || f.replicas > 16 || (f.replicas > 1 && f.protocol != "kafka") {
		return nil, fmt.Errorf("--replication-factor: want 1 to 16, and above 1 over kafka only, got %d", f.replicas)
	}
	shape := benchShape{partitions: int32(max(f.partitions, 1)), replication: int16(f.replicas), consumers: f.cfg.Consumers, prefetch: f.cfg.Prefetch}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", f.tlsCA)
		}
		shape.tls = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	switch f.protocol {
	case "native":
		return newNativeDriver(f.server, shape, f.gzip, !f.unary, f.batches), nil
	case "kafka":
		d, err := newKafkaDriver(ctx, f.kafkaAddr, shape, f.kafkaSASL, f.kafkaProducers)
		if d != nil {
			d.transactional = f.kafkaTxn
		}
		return d, err
	case "sqs":
		return newSQSDriver(ctx, f.sqsURL, f.cfg.Prefetch, shape.tls, f.sqsRawSend)
	}
	return nil, fmt.Errorf("--protocol: want native, kafka or sqs, got %q", f.protocol)
}

func (f *benchFlags) print(w io.Writer, rep benchReport) error {
	if f.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if err := load.WriteTable(w, []load.Result{rep.Result}); err != nil {
		return err
	}
	if rep.Disk != nil {
		_, err := fmt.Fprintln(w, "\n"+rep.Disk.String())
		return err
	}
	return nil
}

// takePushed is Receive for a consumer whose messages a goroutine pushes
// into msgs (a native Consume stream, SQS pollers): it waits up to wait for
// the first one, or the goroutine's error, then takes what else is there,
// up to limit, without waiting.
func takePushed(ctx context.Context, msgs <-chan load.Msg, errc <-chan error, limit int, wait time.Duration) ([]load.Msg, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	var out []load.Msg
	select {
	case m := <-msgs:
		out = append(out, m)
	case err := <-errc:
		return nil, err
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(out) < limit {
		select {
		case m := <-msgs:
			out = append(out, m)
		default:
			return out, nil
		}
	}
	return out, nil
}
