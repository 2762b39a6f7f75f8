package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
)

// TestClusterQueueRetentionChange: a replicated queue's MessageRetentionPeriod changes
// after creation (it was refused): every replica's machine takes the new retention from
// one place in its group's log, a message older than it expires while a younger one is
// delivered, the catalog keeps the times the group was created with, and a replica that
// loses power and replays rebuilds the same state as its peers. On an injected clock.
func TestClusterQueueRetentionChange(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	clock := newClock()
	c := newMemClusterClock(t, 3, 0, clock.Now)
	ctx := context.Background()
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateQueue(QueueSettings{Name: "q", Retention: 24 * time.Hour})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	send := func(body string) {
		t.Helper()
		if err := c.forwarded(func(b *Broker) error {
			rs, err := b.Send(ctx, "q", []SendInput{{Body: []byte(body)}})
			if err == nil && rs[0].Err != nil {
				err = rs[0].Err
			}
			return err
		}); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}
	send("old")
	clock.Advance(2 * time.Hour) // within the 24 hours: delivered and deleted
	if got := c.receiveQueue(t, "q", 10); len(got) != 1 || string(got[0].Message.Body) != "old" {
		t.Fatalf("under the creation's retention: %d messages, want old", len(got))
	}
	send("young")
	clock.Advance(50 * time.Minute)
	send("new")
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.UpdateQueue("q", func(s *QueueSettings) { s.Retention, s.MaxExtension = time.Hour, 30*time.Minute })
		return err
	}); err != nil {
		t.Fatalf("retention change: %v", err)
	}
	want := replqueue.Times{Visibility: 30 * time.Minute, MaxExtension: 30 * time.Minute, Retention: time.Hour}
	c.queueTimesAre(t, "q", want)
	for _, id := range c.ids {
		cq := c.nodes[id].b.cluster.meta.State().Queues["q"]
		s, _ := queueSettingsOf(cq)
		created, err := createdConfig(cq, s)
		if err != nil || created.Retention != 24*time.Hour || s.Retention != time.Hour {
			t.Fatalf("n%d's catalog: retention %v, created with %v (%v); want 1h and 24h", id, s.Retention, created.Retention, err)
		}
	}

	clock.Advance(20 * time.Minute) // young is 70 minutes old, new 20
	got := c.receiveQueue(t, "q", 10)
	if len(got) != 1 || string(got[0].Message.Body) != "new" {
		t.Fatalf("after the retention went to an hour: %d messages (%v), want only new", len(got), got)
	}

	// A replica's power cut: it replays its group (from the creation's times, then the
	// Configure entry) and holds what its peers hold, byte for byte: replayed with the new
	// hour from the start, "old" would have expired before its receive instead.
	victim := c.ids[2]
	c.crash(victim, true)
	send("later")
	c.start(victim)
	c.queueTimesAre(t, "q", want)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var snaps []string
		for _, id := range c.ids {
			if h := c.nodes[id].b.cluster.hostedQueue("q"); h != nil {
				b, _ := h.sm.Snapshot()
				snaps = append(snaps, string(b))
			}
		}
		if len(snaps) == 3 && snaps[0] == snaps[1] && snaps[1] == snaps[2] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas' states differ after n%d's restart", victim)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// queueTimesAre waits until every live replica's machine of queue holds times want.
func (c *memCluster) queueTimesAre(t *testing.T, queue string, want replqueue.Times) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range c.ids {
		for {
			err := c.queueTimesOn(id, queue, want)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (c *memCluster) queueTimesOn(id multiraft.NodeID, queue string, want replqueue.Times) error {
	b := c.nodes[id].b
	if b == nil {
		return nil
	}
	h := b.cluster.hostedQueue(queue)
	if h == nil {
		return fmt.Errorf("n%d hosts no replica of %s", id, queue)
	}
	cfg := h.sm.Config()
	if got := (replqueue.Times{Visibility: cfg.Visibility, MaxExtension: cfg.MaxExtension, Retention: cfg.Retention}); got != want {
		return fmt.Errorf("n%d's replica of %s holds %+v, want %+v", id, queue, got, want)
	}
	return nil
}
