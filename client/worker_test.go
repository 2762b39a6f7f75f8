package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// runWorker runs w until the test ends (or the test stops it itself).
func runWorker(t *testing.T, w *client.Worker) <-chan error {
	t.Helper()
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		done <- w.Run(context.Background())
		close(finished)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Stop(ctx)
		<-finished
	})
	return done
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// eventually polls cond, bounded, for effects another goroutine completes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func stats(t *testing.T, c *client.Client, q string) *client.QueueStats {
	t.Helper()
	info, err := c.GetQueue(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	return info.GetStats()
}

// A handler that outlives its lease keeps the message: the worker extends
// the lease every half lease, so nobody else receives it meanwhile. The
// lease is 2 s, not less: an extension must land within the half lease
// left after it was sent, and under -race on a loaded 2-core CI machine a
// durable extension took longer than the 150 ms a 300 ms lease left it.
func TestWorkerExtendsLeaseWhileHandlerRuns(t *testing.T) {
	c, _ := sluicetest.New(t)
	mustCreate(t, c, "slow", nil)
	if _, err := c.Send(t.Context(), "slow", []byte("x")); err != nil {
		t.Fatal(err)
	}
	extended := make(chan struct{}, 16)
	handled := make(chan struct{})
	w := c.NewWorker("slow", func(ctx context.Context, m *client.Message) error {
		for range 3 { // three renewals of a 4 s lease: the handler runs past it
			waitFor(t, extended, "a lease extension")
		}
		close(handled)
		return nil
		// 4 s, renewed every 2 s: a 2 s lease left 1 s for each renewal's round trip, which
		// a loaded CI machine (-race, two cores) once missed, and the message came again.
	}, client.LeaseDuration(4*time.Second))
	client.SetExtendHook(w, func(*client.Message) { extended <- struct{}{} })
	runWorker(t, w)
	waitFor(t, handled, "the handler")
	// The ack follows the handler's return on the worker's goroutine.
	eventually(t, "the ack", func() bool { return stats(t, c, "slow").GetAckedTotal() == 1 })
	if st := stats(t, c, "slow"); st.GetReceivedTotal() != 1 || st.GetRedeliveredTotal() != 0 {
		t.Errorf("the message was delivered again while held: %v", st)
	}
}

func TestWorkerBackoffDoublesAndCaps(t *testing.T) {
	c, _ := sluicetest.New(t)
	w := c.NewWorker("q", nil, client.Backoff(time.Second, 10*time.Second))
	client.NoJitter(w)
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 50: 10 * time.Second} {
		if got := client.BackoffOf(w, n); got != want {
			t.Errorf("backoff after failure %d = %v, want %v", n, got, want)
		}
	}
	jittered := c.NewWorker("q", nil, client.Backoff(time.Second, time.Minute))
	for range 100 {
		if d := client.BackoffOf(jittered, 3); d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("jittered backoff %v outside [2s, 4s]", d)
		}
	}
}

// A failed handler's message is nacked with a backoff delay: it comes back,
// with a higher receive count, no sooner than half the minimum backoff.
func TestWorkerNacksFailuresWithBackoff(t *testing.T) {
	c, _ := sluicetest.New(t)
	mustCreate(t, c, "flaky", nil)
	if _, err := c.Send(t.Context(), "flaky", []byte("x")); err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		count int32
		at    time.Time
	}
	attempts := make(chan attempt, 4)
	var errs atomic.Int32
	w := c.NewWorker("flaky", func(ctx context.Context, m *client.Message) error {
		attempts <- attempt{m.GetReceiveCount(), time.Now()}
		if m.GetReceiveCount() == 1 {
			return errors.New("temporary failure")
		}
		return nil
	}, client.Backoff(400*time.Millisecond, time.Second), client.OnError(func(*client.Message, error) { errs.Add(1) }))
	runWorker(t, w)
	first := waitFor(t, attempts, "the first attempt")
	second := waitFor(t, attempts, "the retry")
	if first.count != 1 || second.count != 2 {
		t.Errorf("receive counts %d, %d; want 1, 2", first.count, second.count)
	}
	if gap := second.at.Sub(first.at); gap < 200*time.Millisecond {
		t.Errorf("retried after %v, before the backoff's lower bound of 200ms", gap)
	}
	if errs.Load() < 1 {
		t.Error("OnError was not told about the handler's failure")
	}
}

// A panicking handler does not kill the worker: the message is nacked with
// the panic as its reason, which reaches the dead-letter queue.
func TestWorkerTurnsPanicsIntoNacks(t *testing.T) {
	c, _ := sluicetest.New(t)
	mustCreate(t, c, "boom-dlq", nil)
	mustCreate(t, c, "boom", &client.QueueConfig{DeadLetter: &client.DeadLetterPolicy{Queue: "boom-dlq", MaxReceives: 1}})
	if _, err := c.Send(t.Context(), "boom", []byte("x")); err != nil {
		t.Fatal(err)
	}
	w := c.NewWorker("boom", func(context.Context, *client.Message) error { panic("kaboom") }, client.Backoff(0, 0))
	runWorker(t, w)
	// The worker's next receive moves the message to the dead-letter queue.
	dead := receiveOne(t, c, "boom-dlq")
	if r := dead.GetDeadLetter().GetLastNackReason(); !strings.Contains(r, "panicked: kaboom") {
		t.Errorf("dead letter reason %q, want the panic", r)
	}
}

// Stop waits for handlers in flight, which then ack; Run returns nil.
func TestWorkerStopWaitsForInFlightHandlers(t *testing.T) {
	c, _ := sluicetest.New(t)
	mustCreate(t, c, "graceful", nil)
	const n = 3
	for range n {
		if _, err := c.Send(t.Context(), "graceful", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	var running sync.WaitGroup
	running.Add(n)
	release := make(chan struct{})
	w := c.NewWorker("graceful", func(ctx context.Context, m *client.Message) error {
		running.Done()
		<-release
		return nil
	}, client.Concurrency(n), client.Prefetch(0))
	ran := runWorker(t, w)
	allRunning := make(chan struct{})
	go func() { running.Wait(); close(allRunning) }() // n handlers at once: concurrency works
	waitFor(t, allRunning, "all handlers to start")

	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while handlers were still running")
	case <-ran:
		t.Fatal("Run returned while handlers were still running")
	default:
	}
	close(release)
	if err := waitFor(t, stopped, "Stop"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, ran, "Run"); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, c, "graceful"); st.GetAckedTotal() != n {
		t.Errorf("acked %d of %d after a graceful stop", st.GetAckedTotal(), n)
	}
}

func TestWorkerReturnsWhenQueueIsMissing(t *testing.T) {
	c, _ := sluicetest.New(t)
	w := c.NewWorker("missing", func(context.Context, *client.Message) error { return nil })
	if err := w.Run(t.Context()); !errors.Is(err, client.ErrQueueNotFound) {
		t.Errorf("Run = %v, want ErrQueueNotFound", err)
	}
}
