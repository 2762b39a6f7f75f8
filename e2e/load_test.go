package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// TestSigtermUnderLoadLosesNothingAcked sends from several goroutines,
// recording every message id the broker acknowledged, sends SIGTERM in the
// middle of it, restarts the broker on the same data and receives
// everything: each acknowledged message must be there.
func TestSigtermUnderLoadLosesNothingAcked(t *testing.T) {
	data := t.TempDir()
	p := start(t, data)
	c := client.New(p.url)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "load", nil); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex // guards acked
	acked := map[string]bool{}
	const senders = 8
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := 0; ; i++ {
				res, err := c.Send(ctx, "load", fmt.Appendf(nil, "%d-%d", s, i))
				if err != nil {
					return // the broker is stopping: refused or cut off, never acknowledged
				}
				mu.Lock()
				acked[res.GetMessageId()] = true
				if len(acked) >= 300 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatal("fewer than 300 sends acknowledged in 60s")
	}
	p.Stop() // SIGTERM while the senders are still sending
	wg.Wait()

	p2 := start(t, data)
	c2 := client.New(p2.url)
	seen := map[string]bool{}
	for {
		msgs, err := c2.Receive(ctx, "load", client.MaxMessages(100))
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			seen[m.GetId()] = true
		}
	}
	missing := 0
	for id := range acked {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged sends were lost across SIGTERM", missing, len(acked))
	}
	t.Logf("%d acknowledged, %d stored (the rest were in flight at SIGTERM and not acknowledged)", len(acked), len(seen))
	p2.Stop()
}

// TestMetricsShowWhatTheTestCaused drives a queue into a known state and
// reads it back from /metrics.
func TestMetricsShowWhatTheTestCaused(t *testing.T) {
	p := start(t, t.TempDir())
	c := client.New(p.url)
	ctx := context.Background()
	if _, err := c.CreateQueue(ctx, "x", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.Send(ctx, "x", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Send(ctx, "x", []byte("later"), client.WithDelay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Receive(ctx, "x", client.MaxMessages(2))
	if err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %d, %v", len(msgs), err)
	}
	if err := c.Ack(ctx, "x", msgs[0].GetReceipt()); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(ctx, "x", msgs[0].GetReceipt()); !errors.Is(err, client.ErrReceiptStale) {
		t.Fatalf("second ack: %v", err)
	}
	code, body := get(p.url + "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`sluice_queue_messages{queue="x",state="visible"} 3`,
		`sluice_queue_messages{queue="x",state="inflight"} 1`,
		`sluice_queue_messages{queue="x",state="delayed"} 1`,
		`sluice_queue_sent_total{queue="x"} 6`,
		`sluice_queue_received_total{queue="x"} 2`,
		`sluice_queue_acked_total{queue="x"} 1`,
		`sluice_queue_stale_ack_refused_total{queue="x"} 1`,
		`sluice_request_duration_seconds_count{operation="Send",protocol="native"} 6`,
		`sluice_request_duration_seconds_count{operation="Ack",protocol="native"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		for _, l := range strings.Split(body, "\n") {
			if strings.Contains(l, `queue="x"`) || strings.Contains(l, "request_duration_seconds_count") {
				t.Log(l)
			}
		}
	}
	p.Stop()
}
