package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/broker"
)

// startCompactingNode is startNode with small segments and the cleaner
// running every 50 ms, as `sluice serve` runs it.
func startCompactingNode(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	b, err := broker.Open(broker.Options{Dir: dir, Logger: quietLogger(), Sync: broker.SyncPolicy{Mode: broker.SyncNever},
		SegmentBytes: 8 << 10, CompactionInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.StartMaintenance(time.Hour)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, dir: dir, b: b, s: New(b, withLogger(Config{})), addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { n.done <- n.s.Serve(ln) }()
	t.Cleanup(n.stop)
	return n
}

// TestCompactedTopicFranz: franz-go creates a compacted topic with
// compaction configs, a record without a key is refused with
// INVALID_RECORD, updates are produced, the background cleaner compacts
// them, and a consumer from the beginning sees the latest value of every
// key and far fewer records than were produced.
func TestCompactedTopicFranz(t *testing.T) {
	n := startCompactingNode(t)
	ctx := testCtx(t, 30*time.Second)
	adm := n.admin()
	ratio, lag := "0.01", "0"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": strp("compact"),
		"min.cleanable.dirty.ratio": &ratio, "delete.retention.ms": strp("0"), "min.compaction.lag.ms": &lag}, "state")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	for name, want := range map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms": "0", "max.compaction.lag.ms": "9223372036854775807"} {
		if v := topicConfigValue(t, adm, "state", name); v != want {
			t.Fatalf("%s = %q, want %q", name, v, want)
		}
	}
	cl := n.client(kgo.DefaultProduceTopic("state"), kgo.RecordRetries(0), kgo.ProducerLinger(time.Millisecond))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("record without a key: %v, want INVALID_RECORD", err)
	}
	latest := map[string]string{}
	const updates = 3000
	for i := 0; i < updates; i += 100 {
		var recs []*kgo.Record
		for j := i; j < i+100; j++ {
			k, v := fmt.Sprintf("key-%02d", j%50), fmt.Sprintf("value %d", j)
			latest[k] = v
			recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The last segment stays active (never cleaned): wait until the
	// cleaner has shrunk the sealed ones.
	var got map[string]string
	var count int
	for {
		got, count = consumeCompacted(t, n, ctx)
		if count < updates/4 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("still %d of %d records after 30 s: the cleaner did not run", count, updates)
		case <-time.After(100 * time.Millisecond):
		}
	}
	for k, v := range latest {
		if got[k] != v {
			t.Fatalf("key %s: %q, want %q", k, got[k], v)
		}
	}
	// librdkafka (kcat) reads the compacted log from the beginning too:
	// offsets with gaps, the latest value of every key.
	lines := strings.Split(strings.TrimSpace(n.kcat("", "-C", "-t", "state", "-o", "beginning", "-e", "-q", "-f", "%o %k=%s\n")), "\n")
	fromKcat, lastOff := map[string]string{}, int64(-1)
	for _, line := range lines {
		var off int64
		var kv string
		if _, err := fmt.Sscanf(line, "%d %s", &off, &kv); err != nil || off <= lastOff {
			t.Fatalf("kcat line %q after offset %d: %v", line, lastOff, err)
		}
		k, _, _ := strings.Cut(kv, "=")
		lastOff, fromKcat[k] = off, line[strings.Index(line, "=")+1:]
	}
	if len(lines) >= updates/4 || len(fromKcat) != len(latest) {
		t.Fatalf("kcat read %d records, %d keys; want under %d, %d keys", len(lines), len(fromKcat), updates/4, len(latest))
	}
	for k, v := range latest {
		if fromKcat[k] != v {
			t.Fatalf("kcat: key %s = %q, want %q", k, fromKcat[k], v)
		}
	}
	if _, tot := n.b.CompactionStats(); tot.Passes == 0 || tot.BytesWritten == 0 {
		t.Fatalf("cleaner totals %+v", tot)
	}
	if r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: strp("delete,compact")}}, "state"); err != nil || r[0].Err != nil {
		t.Fatalf("alter to delete,compact: %v %+v", err, r)
	}
	if v := topicConfigValue(t, adm, "state", "cleanup.policy"); v != "compact,delete" {
		t.Fatalf("cleanup.policy %q after alter", v)
	}
}

// consumeCompacted reads the topic from the beginning to its end.
func consumeCompacted(t *testing.T, n *node, ctx context.Context) (map[string]string, int) {
	t.Helper()
	offs, err := n.admin().ListEndOffsets(ctx, "state")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := offs.Lookup("state", 0)
	c := n.client(kgo.ConsumeTopics("state"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer c.Close()
	out, count, last := map[string]string{}, 0, int64(-1)
	for last < end.Offset-1 {
		fs := c.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			out[string(r.Key)] = string(r.Value)
			count++
		})
	}
	return out, count
}
