package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestPublishStreamKillLoop runs the real binary under --fsync always,
// publishes over StreamService.Publish (the batching client, 32 senders, a
// topic and a queue) and SIGKILLs the server while requests are in flight,
// SLUICE_PUBLISH_KILLS rounds (2 by default). After each restart every
// answered record is in the log at the offset its answer gave, with its
// value, and every answered message is still in the queue: an answer never
// comes before the disk has its entries, however many one fsync carried.
func TestPublishStreamKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	rounds := 2
	if v, err := strconv.Atoi(os.Getenv("SLUICE_PUBLISH_KILLS")); err == nil && v > 0 {
		rounds = v
	}
	bin := testproc.Build(t, t.TempDir())
	dir := t.TempDir()
	start := func() (*testproc.Proc, *client.Client) {
		p := testproc.Serve(t, bin, "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--kafka-addr", "",
			"--sqs-addr", "", "--fsync", "always")
		c := client.New("http://" + p.Addr("http"))
		waitReady(t, c)
		return p, c
	}
	proc, c := start()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "log", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	answered := map[int64]string{} // offset -> value
	sent := map[string]bool{}      // message ids answered
	rng := rand.New(rand.NewPCG(3, 5))
	for round := range rounds {
		recs, msgs := publishUntilKilled(ctx, c, round, func() {
			time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
			proc.Kill()
		})
		for off, v := range recs {
			answered[off] = v
		}
		for id := range msgs {
			sent[id] = true
		}
		if len(recs) == 0 || len(msgs) == 0 {
			t.Fatalf("round %d: %d records and %d messages answered before the kill: the test proves nothing", round, len(recs), len(msgs))
		}
		proc, c = start()
		checkLog(t, ctx, c, answered)
	}
	checkQueue(t, ctx, c, sent)
}

// publishUntilKilled publishes from 32 goroutines until kill has run and
// every publish has failed, returning what was answered.
func publishUntilKilled(ctx context.Context, c *client.Client, round int, kill func()) (map[int64]string, map[string]bool) {
	tp := c.TopicPublisher("log", &client.PublisherOptions{MaxInFlight: 4})
	qp := c.QueuePublisher("q", &client.PublisherOptions{MaxInFlight: 4})
	var mu sync.Mutex
	recs, msgs := map[int64]string{}, map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("r%d-g%d-%d", round, g, i)
				var f *client.PublishFuture
				var err error
				if g%2 == 0 {
					f, err = tp.PublishRecord(ctx, &client.ProduceRecord{Value: []byte(v)})
				} else {
					f, err = qp.PublishMessage(ctx, client.Entry([]byte(v)))
				}
				if err != nil {
					return
				}
				r, err := f.Wait(ctx)
				if err != nil {
					continue // the server died under it; keep going until stopped
				}
				mu.Lock()
				if g%2 == 0 {
					recs[r.GetRecord().GetOffset()] = v
				} else {
					msgs[r.GetMessage().GetMessageId()] = true
				}
				mu.Unlock()
			}
		})
	}
	kill()
	time.Sleep(50 * time.Millisecond) // what was in flight fails
	close(stop)
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = tp.Close(closeCtx)
	_ = qp.Close(closeCtx)
	return recs, msgs
}

func checkLog(t *testing.T, ctx context.Context, c *client.Client, answered map[int64]string) {
	t.Helper()
	got := map[int64]string{}
	for off := int64(0); ; {
		f, err := c.Fetch(ctx, &client.FetchRequest{Topic: "log", MaxRecords: 5000,
			Partitions: []*client.PartitionOffset{{Partition: 0, Offset: off}}})
		if err != nil {
			t.Fatal(err)
		}
		p := f.GetPartitions()[0]
		for _, r := range p.GetRecords() {
			got[r.GetOffset()] = string(r.GetValue())
		}
		if p.GetNextOffset() <= off || p.GetNextOffset() >= p.GetHighWatermark() {
			break
		}
		off = p.GetNextOffset()
	}
	for off, v := range answered {
		if got[off] != v {
			t.Fatalf("offset %d: log has %q, the answer was for %q (%d answered, %d in the log)", off, got[off], v, len(answered), len(got))
		}
	}
}

func checkQueue(t *testing.T, ctx context.Context, c *client.Client, sent map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	for {
		ms, err := c.Receive(ctx, "q", client.MaxMessages(100), client.Wait(0), client.Visibility(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			seen[m.GetId()] = true
		}
	}
	for id := range sent {
		if !seen[id] {
			t.Fatalf("message %s was answered but is not in the queue after the kills (%d answered, %d there)", id, len(sent), len(seen))
		}
	}
}

// waitReady waits until the restarted server has mounted its API (it
// answers 503 while it recovers).
func waitReady(t *testing.T, c *client.Client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.ListQueues(t.Context(), "")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
