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
// loses power and comes back (restored from its checkpoint, refilled from
// a peer's log). The cleaner leaves replicated partitions alone
// (cleanReplicated): afterwards every replica holds, at each offset, what
// was acknowledged there, nothing was rewritten, and keys were required.
//
// With cleanReplicated on, before replicas refilled their logs from
// peers, this test passed with the TruncateSuffix gap rule and failed
// without it; since the refill it fails on the pull (a wiped replica
// cannot get a compacted range), which is why the switch is off.
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
		if _, tot := c.nodes[id].b.CompactionStats(); tot.BytesWritten != 0 {
			t.Fatalf("n%d: the cleaner rewrote a replicated partition: %+v", id, tot)
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
