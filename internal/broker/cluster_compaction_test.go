package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestClusterCompaction: a compacted topic replicated on three nodes, the
// cleaner run on every node between rounds in which a node is killed or
// loses power and comes back (restored from its checkpoint, its lost records
// refilled from a peer's cleaned log, whose gaps come as empty batches).
// Every replica cleans its own log: afterwards each holds, at each offset,
// what was acknowledged there and every key's latest record, every node's
// cleaner rewrote segments, and keys were required. A subscription from the
// start of such a topic is refused (replicas clean apart), one from its end
// is taken, and the cleaner then leaves the partition alone.
//
// Before the pull sent gaps as empty batches and appended cleaned batches
// whole (AppendCopied), this test failed on the pull: a replica that lost
// its unsynced records could not get a compacted range back.
func TestClusterCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemClusterSegments(t, 3, 2048)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "kv", CleanupPolicy: CleanupCompact, MinCleanableDirtyRatio: -1}); err != nil {
		t.Fatal(err)
	}
	acked := map[int64]string{}  // offset -> "key=value"
	latest := map[string]int64{} // key -> offset of its latest acknowledged record
	next := 0
	p := int32(0)
	produce := func(n int) {
		for range n {
			k := fmt.Sprintf("k%d", next%12)
			v := fmt.Sprintf("%s=%d", k, next)
			next++
			for attempt := 0; ; attempt++ {
				if attempt == 400 {
					t.Fatalf("no leader for kv/0 for 4 s")
				}
				b := c.leaderOf("kv", p)
				if b == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				res, err := b.Produce(ctx, "kv", []ProduceRecord{{Key: []byte(k), Value: []byte(v), Partition: &p}}, ProduceOptions{})
				cancel()
				if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrClosed) {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if errors.Is(err, ErrReplicationUnknown) {
					break // maybe stored: not acknowledged, and never the key's known latest
				}
				if err != nil {
					t.Fatalf("produce %s: %v", v, err)
				}
				acked[res[0].Offset] = v
				if res[0].Offset > latest[k] {
					latest[k] = res[0].Offset
				}
				break
			}
		}
	}
	clean := func() {
		for _, id := range c.ids {
			if b := c.nodes[id].b; b != nil {
				if err := b.CleanCompacted(nil); err != nil {
					t.Fatalf("n%d: clean: %v", id, err)
				}
			}
		}
	}
	for round := range 4 {
		produce(80)
		clean()
		victim := c.ids[round%len(c.ids)]
		c.crash(victim, round%2 == 1)
		produce(40)
		clean()
		c.start(victim)
	}
	produce(20)
	time.Sleep(200 * time.Millisecond) // let the restarted node catch up before its clean
	clean()
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range c.ids {
		for {
			got, err := localRecords(c.nodes[id].b, "kv", 0)
			msg := compactedCovers(got, err, acked, latest)
			if msg == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("n%d: %s", id, msg)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, id := range c.ids {
		if _, tot := c.nodes[id].b.CompactionStats(); tot.BytesWritten == 0 {
			t.Fatalf("n%d: the cleaner never rewrote its replica: %+v", id, tot)
		}
	}
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "kv", Name: "all", FromEarliest: true})
		return err
	}); !errors.As(err, new(*InvalidArgumentError)) {
		t.Fatalf("a subscription from the start of a replicated compacted topic: %v, want an InvalidArgumentError", err)
	}
	if err := c.forwarded(func(b *Broker) error {
		_, err := b.CreateSubscription(SubscriptionSettings{Topic: "kv", Name: "new"})
		return err
	}); err != nil {
		t.Fatalf("a subscription from the end: %v", err)
	}
	before := map[int64]int64{}
	for _, id := range c.ids {
		_, tot := c.nodes[id].b.CompactionStats()
		before[int64(id)] = tot.BytesWritten
	}
	produce(60)
	time.Sleep(200 * time.Millisecond) // every node applies the catalog's subscription
	clean()
	for _, id := range c.ids {
		if _, tot := c.nodes[id].b.CompactionStats(); tot.BytesWritten != before[int64(id)] {
			t.Fatalf("n%d cleaned a partition whose topic has a subscription", id)
		}
	}
	if _, err := c.leaderOf("kv", 0).Produce(context.Background(), "kv", []ProduceRecord{{Value: []byte("no key"), Partition: &p}}, ProduceOptions{}); !errors.Is(err, ErrKeyRequired) {
		t.Fatalf("keyless produce in a cluster: %v", err)
	}
}

// compactedCovers says what is wrong with a replica's compacted log: a
// record that differs from what was acknowledged at its offset, or a key's
// latest acknowledged record missing.
func compactedCovers(got map[int64]string, err error, acked map[int64]string, latest map[string]int64) string {
	if err != nil {
		return err.Error()
	}
	for off, v := range got {
		if a, ok := acked[off]; ok && a != v {
			return fmt.Sprintf("offset %d holds %q, %q was acknowledged there", off, v, a)
		}
		if _, ok := acked[off]; !ok && !strings.Contains(v, "=") {
			return fmt.Sprintf("offset %d holds %q", off, v)
		}
	}
	for k, off := range latest {
		if got[off] != acked[off] {
			return fmt.Sprintf("latest %s (offset %d, %q) missing: %q", k, off, acked[off], got[off])
		}
	}
	return ""
}
