package kafka

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestCompactionKillLoop runs the real binary with small segments and a
// cleaner every 20 ms, produces keyed updates to a compacted topic
// (acknowledged under --fsync always), and kills it with SIGKILL at a
// random moment while the cleaner works, again and again
// (SLUICE_COMPACTION_KILLS rounds, 4 in CI). After every restart a consumer
// from the beginning sees the latest acknowledged value of every key, and
// offsets only increase.
func TestCompactionKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	rounds := 4
	if v, err := strconv.Atoi(os.Getenv("SLUICE_COMPACTION_KILLS")); err == nil && v > 0 {
		rounds = v
	}
	bin := testproc.Build(t, t.TempDir())
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(11, 13))
	latest := map[string]string{}
	var proc *testproc.Proc
	start := func() *node {
		proc = testproc.Serve(t, bin, "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0",
			"--sqs-addr", "", "--fsync", "always", "--segment-bytes", "8KiB", "--compaction-interval", "20ms")
		return &node{t: t, addr: proc.Addr("kafka")}
	}
	n := start()
	ctx := testCtx(t, 120*time.Second)
	ratio := "0.01"
	if r, err := kadm.NewClient(n.client()).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": strp("compact"),
		"min.cleanable.dirty.ratio": &ratio}, "kv"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	next := 0
	for round := range rounds {
		cl := n.client(kgo.DefaultProduceTopic("kv"), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(1024))
		var recs []*kgo.Record
		for range 600 {
			k := fmt.Sprintf("key-%02d", rng.IntN(30))
			v := fmt.Sprintf("%s=%d", k, next)
			next++
			recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
		for _, r := range recs {
			latest[string(r.Key)] = string(r.Value)
		}
		cl.Close()
		time.Sleep(time.Duration(rng.IntN(120)) * time.Millisecond) // the cleaner is at work
		proc.Kill()
		n = start()
		if count := checkLatest(t, n, ctx, latest); round == rounds-1 && count > next/2 {
			t.Fatalf("%d of %d records left after %d rounds: the cleaner did not run", count, next, rounds)
		}
	}
}

// checkLatest consumes kv from the beginning to its end and compares the
// last value of each key with the latest acknowledged one.
func checkLatest(t *testing.T, n *node, ctx context.Context, latest map[string]string) (records int) {
	t.Helper()
	offs, err := kadm.NewClient(n.client()).ListEndOffsets(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := offs.Lookup("kv", 0)
	c := n.client(kgo.ConsumeTopics("kv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer c.Close()
	got, last := map[string]string{}, int64(-1)
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
			got[string(r.Key)] = string(r.Value)
			records++
		})
	}
	for k, v := range latest {
		if got[k] != v {
			t.Fatalf("after a kill: key %s = %q, latest acknowledged %q", k, got[k], v)
		}
	}
	return records
}
