package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// openCompactionBroker is a broker with small segments, so that a test's
// records fill sealed segments the cleaner may rewrite.
func openCompactionBroker(t *testing.T, fsys vfs.FS, c *fakeClock) *Broker {
	t.Helper()
	b, err := Open(Options{Dir: "/data", FS: fsys, Now: c.Now, Logger: quietLogger(), HeadroomBytes: testHeadroom,
		SegmentBytes: 4096, CompactionBufferBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// consumeAll fetches partition 0 from the log start: every record's key,
// value and offset.
func consumeAll(t *testing.T, b *Broker, topic string) (keys []string, vals map[string]string, offs []int64) {
	t.Helper()
	vals = map[string]string{}
	for off := int64(0); ; {
		res, err := b.Fetch(context.Background(), topic, 0, off, FetchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Batches) == 0 {
			// Nothing here: the end of what is stable, or a gap the
			// cleaner left that this fetch stopped at (go on past it).
			if res.Next > off {
				off = res.Next
				continue
			}
			if off < res.LastStableOffset {
				t.Fatalf("fetch at %d returned nothing below the last stable offset %d", off, res.LastStableOffset)
			}
			return keys, vals, offs
		}
		for buf := res.Batches; len(buf) > 0; {
			h, _ := batch.ParseHeader(buf)
			for r, err := range batch.Records(buf[:h.Size()]) {
				if err != nil {
					t.Fatal(err)
				}
				if r.Offset >= off {
					keys, offs = append(keys, string(r.Key)), append(offs, r.Offset)
					vals[string(r.Key)] = string(r.Value)
				}
			}
			buf, off = buf[h.Size():], h.NextOffset()
		}
	}
}

// TestCompactedTopic: a compacted topic refuses records without a key,
// keeps the latest value per key after a clean (offsets with gaps),
// survives a restart with its policy, and retention does not delete it.
func TestCompactedTopic(t *testing.T) {
	fsys, c := vfs.NewMem(), newClock()
	b := openCompactionBroker(t, fsys, c)
	defer func() { b.Close() }()
	s, err := b.CreateTopic(TopicSettings{Name: "kv", CleanupPolicy: "delete,compact", Retention: time.Hour, DeleteRetention: -1})
	if err != nil || s.CleanupPolicy != CleanupCompactDelete {
		t.Fatalf("create: %+v %v", s, err)
	}
	ctx := context.Background()
	if _, err := b.Produce(ctx, "kv", []ProduceRecord{{Value: []byte("x")}}, ProduceOptions{}); !errors.Is(err, ErrKeyRequired) {
		t.Fatalf("keyless produce: %v, want ErrKeyRequired", err)
	}
	keyless, _ := batch.Build([]batch.Record{{Key: []byte("k"), Value: []byte("1")}, {Value: []byte("2")}}, batch.Options{LeaderEpoch: -1})
	if _, err := b.ProduceBatches(ctx, "kv", 0, [][]byte{keyless}); !errors.Is(err, ErrKeyRequired) {
		t.Fatalf("keyless batch: %v, want ErrKeyRequired", err)
	}
	latest := map[string]string{}
	for i := range 600 {
		k := fmt.Sprintf("k%02d", i%40)
		v := fmt.Sprintf("v%d-%s", i, k)
		if i%40 == 7 && i > 500 {
			v = "" // deleted below
		}
		rec := ProduceRecord{Key: []byte(k), Value: []byte(v)}
		if v == "" {
			rec.Value = nil
			delete(latest, k)
		} else {
			latest[k] = v
		}
		if _, err := b.Produce(ctx, "kv", []ProduceRecord{rec}, ProduceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.CleanCompacted(nil); err != nil {
		t.Fatal(err)
	}
	stats, tot := b.CompactionStats()
	if len(stats) != 1 || stats[0].LastClean.IsZero() || tot.BytesRead == 0 || tot.BytesWritten == 0 {
		t.Fatalf("stats %+v %+v", stats, tot)
	}
	c.Advance(time.Minute)
	b.CleanCompacted(nil) // delete.retention.ms 0: the tombstone goes at the next clean
	check := func() {
		t.Helper()
		keys, vals, offs := consumeAll(t, b, "kv")
		seen := map[string]int{}
		for i, k := range keys {
			seen[k]++
			if i > 0 && offs[i] <= offs[i-1] {
				t.Fatalf("offsets %d then %d", offs[i-1], offs[i])
			}
		}
		for k, v := range latest {
			if vals[k] != v {
				t.Fatalf("key %s: %q, want %q", k, vals[k], v)
			}
		}
		if len(keys) >= 300 || offs[len(offs)-1] != 599 {
			t.Fatalf("%d records after cleaning (last offset %d): not compacted", len(keys), offs[len(offs)-1])
		}
	}
	check()
	b.Maintain() // retention of an hour deletes nothing yet
	b.Close()
	b = openCompactionBroker(t, fsys, c)
	if info, err := b.DescribeTopic("kv"); err != nil || info.Settings.CleanupPolicy != CleanupCompactDelete || info.Settings.DeleteRetention != -1 {
		t.Fatalf("after restart: %+v %v", info.Settings, err)
	}
	check()
	// compact alone: retention deletes nothing, however old.
	if _, err := b.UpdateTopic("kv", false, func(s *TopicSettings) error { s.CleanupPolicy = CleanupCompact; return nil }); err != nil {
		t.Fatal(err)
	}
	c.Advance(48 * time.Hour)
	b.Maintain()
	check()
	if _, err := b.UpdateTopic("kv", false, func(s *TopicSettings) error { s.CleanupPolicy = CleanupCompactDelete; return nil }); err != nil {
		t.Fatal(err)
	}
	b.Maintain()
	if info, _ := b.DescribeTopic("kv"); info.Partitions[0].LogStartOffset == 0 {
		t.Fatalf("compact,delete: retention deleted nothing after 48h: %+v", info.Partitions[0])
	}
}

// TestCompactionKeepsWhatSubscriptionsHold: the cleaner stays below the
// lowest offset a fan-out subscription still holds, so a subscription
// created from the start of a compacted topic gets every record.
func TestCompactionKeepsWhatSubscriptionsHold(t *testing.T) {
	c := newClock()
	b := openCompactionBroker(t, vfs.NewMem(), c)
	defer b.Close()
	if _, err := b.CreateTopic(TopicSettings{Name: "kv", CleanupPolicy: CleanupCompact}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(SubscriptionSettings{Topic: "kv", Name: "all", FromEarliest: true}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 400 {
		rec := ProduceRecord{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(fmt.Sprintf("v%d", i))}
		if _, err := b.Produce(ctx, "kv", []ProduceRecord{rec}, ProduceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.CleanCompacted(nil); err != nil {
		t.Fatal(err)
	}
	if keys, _, _ := consumeAll(t, b, "kv"); len(keys) != 400 {
		t.Fatalf("%d records left while a subscription holds all 400", len(keys))
	}
	if _, tot := b.CompactionStats(); tot.BytesWritten != 0 {
		t.Fatalf("the cleaner rewrote segments a subscription holds: %+v", tot)
	}
}
