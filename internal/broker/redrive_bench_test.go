package broker

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkRedrive times an unlimited-rate redrive of a dead-letter queue
// of 1 KiB messages back to their source queue, on the real disk with fsync
// always. Setup (dead-lettering the messages) is not timed. One op is one
// whole redrive; msgs/s is what counts. SLUICE_REDRIVE_BENCH_N sets how
// many messages (default 20,000).
//
//	go test -run '^$' -bench BenchmarkRedrive -benchtime 1x -count 3 ./internal/broker/
func BenchmarkRedrive(b *testing.B) {
	n := 20_000
	if s := os.Getenv("SLUICE_REDRIVE_BENCH_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("SLUICE_REDRIVE_BENCH_N=%q: want a positive number", s)
		}
		n = v
	}
	var moved int64
	var timed time.Duration
	for range b.N {
		br := deadLetterForBench(b, n)
		start := time.Now()
		task, err := br.StartRedrive(RedriveRequest{Source: "dlq"})
		if err != nil {
			b.Fatal(err)
		}
		done, err := br.WaitRedrive(context.Background(), task.ID)
		if err != nil {
			b.Fatal(err)
		}
		timed += time.Since(start)
		if done.Status != RedriveCompleted || done.Moved != int64(n) {
			b.Fatalf("redrive = %+v, want COMPLETED with %d moved", done, n)
		}
		moved += done.Moved
		b.StopTimer()
		if st, _ := br.QueueStats("src"); st.Depth() != int64(n) {
			b.Fatalf("source queue holds %d, want %d", st.Depth(), n)
		}
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(moved)/timed.Seconds(), "msgs/s")
	b.ReportMetric(0, "ns/op") // one op is a whole redrive: msgs/s is the measure
}

// deadLetterForBench opens a broker on a fresh directory of the real disk
// with n 1 KiB messages in queue dlq, each dead-lettered from queue src. The
// clock is a fake one, so dead-lettering needs no waiting; the timer is
// stopped on return.
func deadLetterForBench(b *testing.B, n int) *Broker {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	clock := newClock()
	br, err := Open(Options{Dir: b.TempDir(), FS: vfs.Default, Now: clock.Now, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := br.CreateQueue(QueueSettings{Name: "dlq"}); err != nil {
		b.Fatal(err)
	}
	if _, err := br.CreateQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq"}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	body := make([]byte, 1024)
	// In rounds of 1,000: one receive that dead-letters more than a send
	// batch holds (8 MiB) would fail.
	for sent := 0; sent < n; {
		round := min(1000, n-sent)
		for i := 0; i < round; {
			in := make([]SendInput, min(100, round-i))
			for k := range in {
				in[k] = SendInput{Body: body}
			}
			if _, err := br.Send(ctx, "src", in); err != nil {
				b.Fatal(err)
			}
			i += len(in)
		}
		// Each message's one receive; once it is visible again, the next
		// receive dead-letters it.
		if ds, err := br.Receive(ctx, "src", ReceiveOptions{Max: round}); err != nil || len(ds) != round {
			b.Fatalf("receive: %d, %v", len(ds), err)
		}
		clock.Advance(time.Hour)
		if ds, err := br.Receive(ctx, "src", ReceiveOptions{Max: 1}); err != nil || len(ds) != 0 {
			b.Fatalf("receive to dead-letter: %d, %v", len(ds), err)
		}
		sent += round
	}
	if st, _ := br.QueueStats("dlq"); st.Depth() != int64(n) {
		b.Fatalf("dead-letter queue holds %d, want %d", st.Depth(), n)
	}
	return br
}
