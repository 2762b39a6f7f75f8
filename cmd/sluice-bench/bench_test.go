package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/bench/compare/load"
	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
)

// startAllFrontends runs an in-process broker with the native, Kafka and
// SQS listeners on free 127.0.0.1 ports, stopped when the test ends.
func startAllFrontends(t *testing.T, fsync string) *server.Server {
	t.Helper()
	cfg := server.Defaults()
	cfg.DataDir, cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Fsync = fsync
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "benchtest")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx, node.Setup(node.Options{})); err != nil {
		cancel()
		t.Fatal(err)
	}
	// Wait's goroutine is owned by the cleanup, which cancels and joins it.
	waited := make(chan error, 1)
	go func() { waited <- srv.Wait(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-waited; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv
}

// TestBenchWorkloads runs every workload over every protocol briefly and
// checks the JSON report is consistent. No timing is asserted: the
// machine's speed is not the tool's correctness.
func TestBenchWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker under load")
	}
	srv := startAllFrontends(t, "never") // the test checks the tool, not the disk
	for _, proto := range []string{"native", "kafka", "sqs"} {
		for _, w := range []string{"produce", "consume", "queue", "latency"} {
			t.Run(proto+"/"+w, func(t *testing.T) {
				rep := runBench(t, srv, w, proto, "--count", "300", "--duration", "2s", "--in-flight", "8", "--batch", "2",
					"--rate", "200", "--size", "100", "--probe-dir", t.TempDir(), "--probe-time", "20ms")
				checkBenchResult(t, rep, proto, w)
			})
		}
	}
	for _, w := range []string{"produce", "queue"} {
		t.Run("kafka/"+w+"/transactional", func(t *testing.T) {
			rep := runBench(t, srv, w, "kafka", "--kafka-transactional", "--count", "300", "--duration", "2s", "--in-flight", "8",
				"--batch", "4", "--size", "100", "--probe-dir", t.TempDir(), "--probe-time", "20ms")
			checkBenchResult(t, rep, "kafka", w)
		})
	}
	t.Run("native/queue/no-gzip", func(t *testing.T) {
		rep := runBench(t, srv, "queue", "native", "--gzip=false", "--count", "300", "--duration", "2s", "--in-flight", "8",
			"--size", "100", "--probe-dir", t.TempDir(), "--probe-time", "20ms")
		checkBenchResult(t, rep, "native", "queue")
	})
}

// runBench runs `sluice-bench w --protocol proto -o json` in-process
// against srv and decodes its report.
func runBench(t *testing.T, srv *server.Server, w, proto string, flags ...string) benchReport {
	t.Helper()
	root := newBenchCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{w, "--protocol", proto, "-o", "json", "--quiet",
		"--server", "http://" + srv.Addr(server.HTTP), "--kafka-addr", srv.Addr(server.Kafka),
		"--sqs-url", "http://" + srv.Addr(server.SQS)}, flags...))
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	return rep
}

// TestBenchProfile is a tool, not a check: with SLUICE_BENCH_PROFILE=W1 it
// runs bench/compare's W1 (produce over Kafka), with =W1-native W1 over the
// native API (StreamService.Publish), with =W1-batches the same with record
// batches built by the client (--native-batches), with =W2 its W2 (queue round
// trip over the native API), with =W2-sqs W2 over the SQS API, for 10 s against an in-process broker with
// --fsync always on the real disk, so that
//
//	SLUICE_BENCH_PROFILE=W1 go test -run TestBenchProfile -cpuprofile cpu.out ./cmd/sluice-bench
//
// records where the broker's CPU goes (the client's is in the same
// profile, under its own packages). bench/compare/run.sh runs it.
func TestBenchProfile(t *testing.T) {
	var w, proto string
	var extra []string
	switch os.Getenv("SLUICE_BENCH_PROFILE") {
	case "":
		t.Skip("set SLUICE_BENCH_PROFILE=W1, W1-native, W1-batches, W2 or W2-sqs to profile a workload")
	case "W1":
		w, proto = "produce", "kafka"
	case "W1-native":
		w, proto = "produce", "native"
	case "W1-batches":
		w, proto, extra = "produce", "native", []string{"--native-batches"}
	case "W2":
		w, proto = "queue", "native"
	case "W2-sqs":
		w, proto = "queue", "sqs"
	default:
		t.Fatalf("SLUICE_BENCH_PROFILE=%q: want W1, W1-native, W1-batches, W2 or W2-sqs", os.Getenv("SLUICE_BENCH_PROFILE"))
	}
	srv := startAllFrontends(t, "always")
	rep := runBench(t, srv, w, proto, append([]string{"--duration", "10s", "--count", "100000000", "--size", "1024",
		"--in-flight", "256", "--consumers", "4", "--prefetch", "64", "--probe-dir", ""}, extra...)...)
	t.Logf("%s over %s: %.0f msgs/s, p99 %.2f ms", w, proto, rep.Result.MsgsPerSec, rep.Result.Latency.P99)
}

func checkBenchResult(t *testing.T, rep benchReport, proto, w string) {
	t.Helper()
	r := rep.Result
	if r.Workload != w || r.Target != "sluice/"+proto || r.Size != 100 {
		t.Errorf("workload %q target %q size %d", r.Workload, r.Target, r.Size)
	}
	if r.Sent <= 0 || r.Sent > 300 || r.Seconds <= 0 || r.MsgsPerSec <= 0 || r.MBPerSec <= 0 {
		t.Errorf("sent %d in %.3fs: %.1f msgs/s, %.3f MB/s", r.Sent, r.Seconds, r.MsgsPerSec, r.MBPerSec)
	}
	if w != "produce" && (r.Received <= 0 || r.Received > r.Sent) {
		t.Errorf("received %d of %d", r.Received, r.Sent)
	}
	l := r.Latency
	if w != "consume" && (l.Count == 0 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max || l.P50 < 0) {
		t.Errorf("latency %+v", l)
	}
	if d := rep.Disk; d == nil || d.FdatasyncPerSec <= 0 || d.SyncedMBPerSec <= 0 {
		t.Errorf("disk %+v", d)
	}
}

// TestSQSConsumerHoldsPrefetch checks the bench's SQS consumer the way the
// workloads define a consumer: it holds up to --prefetch messages received
// and not yet deleted (here 12: pollers with quotas of 10 and 2), no more,
// and deleting them makes room for as many again, until the queue is empty.
// With --sqs-raw-send the messages go in as bare POSTs and come out the same.
func TestSQSConsumerHoldsPrefetch(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(fmt.Sprintf("raw-send=%v", raw), func(t *testing.T) { testSQSConsumerHoldsPrefetch(t, raw) })
	}
}

func testSQSConsumerHoldsPrefetch(t *testing.T, raw bool) {
	srv := startAllFrontends(t, "never")
	ctx := t.Context()
	d, err := newSQSDriver(ctx, "http://"+srv.Addr(server.SQS), 12, nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx, "held", load.Queue); err != nil {
		t.Fatal(err)
	}
	p, _ := d.Producer(ctx, "held", load.Queue, 0)
	for i := range 30 {
		if err := p.Send(ctx, [][]byte{fmt.Appendf(nil, "m%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := d.Consumer(ctx, "held", load.Queue, 0)
	defer c.Close()
	seen := map[string]bool{}
	// take receives until it holds n messages (giving up after 30 s), then
	// checks that nothing more comes.
	take := func(n int) []load.Msg {
		t.Helper()
		var held []load.Msg
		for end := time.Now().Add(30 * time.Second); len(held) < n; {
			if time.Now().After(end) {
				t.Fatalf("received %d messages in 30 s, want %d", len(held), n)
			}
			ms, err := c.Receive(ctx, 64, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, ms...)
		}
		if len(held) > n {
			t.Fatalf("holds %d messages, want at most %d", len(held), n)
		}
		if ms, err := c.Receive(ctx, 64, 200*time.Millisecond); err != nil || len(ms) > 0 {
			t.Fatalf("with %d held: received %d more (err %v), want none", n, len(ms), err)
		}
		for _, m := range held {
			if seen[string(m.Body)] {
				t.Fatalf("%s received twice", m.Body)
			}
			seen[string(m.Body)] = true
		}
		return held
	}
	held := take(12)
	if err := c.Ack(ctx, held); err != nil {
		t.Fatal(err)
	}
	held = take(12)
	if err := c.Ack(ctx, held); err != nil {
		t.Fatal(err)
	}
	take(6) // the rest of the 30
}
