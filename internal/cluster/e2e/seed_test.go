package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWipedFollowerRebuilt: three nodes, one partition on all three, SLUICE_E2E_SEED_MIB
// MiB (24; 50 by hand) of 1 KiB records produced. A follower is stopped, its partition
// directory removed (its raft/ kept), and started again: the snapshot its Raft state holds
// names records its log lacks, and its Restore pulls them from a peer over the node-to-node
// transport (sluice_replica_pull_bytes_total). Made leader by a transfer, it serves a fetch
// of the whole partition identical to what the old leader served (offsets, leader epochs,
// values), and once stopped every node's partition log is the same log.
func TestWipedFollowerRebuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	mib := envInt("SLUICE_E2E_SEED_MIB", 24)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "seed", 1, 3)
	start := time.Now()
	produceMiB(ctx, t, c, "seed", mib)
	t.Logf("produced %d MiB in %v", mib, time.Since(start))

	leader := waitLeader(ctx, t, c, "seed", func(int) bool { return true })
	start = time.Now()
	before := fetchAll(ctx, t, c, "seed")
	t.Logf("fetched %d records in %v", len(before), time.Since(start))
	if len(before) != mib*1024 {
		t.Fatalf("the leader served %d records, want %d", len(before), mib*1024)
	}
	follower := 1 + leader%3
	c.procs[follower-1].Stop()
	dirs, err := filepath.Glob(filepath.Join(c.dirs[follower-1], "topics", "*-seed", "0"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("node %d: partition directory: %v %v", follower, dirs, err)
	}
	if err := os.RemoveAll(dirs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.dirs[follower-1], "raft")); err != nil {
		t.Fatal(err)
	}
	c.start(follower)
	for pulled := pullBytes(t, c, follower); pulled == 0; pulled = pullBytes(t, c, follower) {
		if ctx.Err() != nil {
			t.Fatalf("node %d pulled nothing:\n%s", follower, c.procs[follower-1].Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("node %d pulled %d bytes", follower, pullBytes(t, c, follower))
	for c.leaderOf(ctx, adm, "seed", 0) != follower {
		out := c.cli(t, leader, "cluster", "transfer-leader", "seed", "0", "--to", itoa(follower))
		if ctx.Err() != nil {
			t.Fatalf("seed/0 not moved to node %d: %s", follower, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	after := fetchAll(ctx, t, c, "seed")
	if !slices.Equal(after, before) {
		t.Fatalf("node %d, rebuilt and leading, served %d records; the old leader served %d (first difference: %s)",
			follower, len(after), len(before), firstDiff(after, before))
	}
	for i := range c.procs {
		c.procs[i].Stop()
	}
	logs := make([][]stored, 3)
	for i, dir := range c.dirs {
		logs[i] = readPartition(t, dir, "seed")
	}
	for i := 1; i < 3; i++ {
		if !slices.Equal(logs[i], logs[0]) {
			t.Errorf("node %d's log (%d records) differs from node 1's (%d)", i+1, len(logs[i]), len(logs[0]))
		}
	}
}

// produceMiB produces mib MiB of 1 KiB records (acks=all, idempotent) and waits for all.
func produceMiB(ctx context.Context, t *testing.T, c *cluster, topic string, mib int) {
	t.Helper()
	// Uncompressed: the Raft log and the snapshots count the bytes as stored.
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := bytes.Repeat([]byte("x"), 1000)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for i := range mib * 1024 {
		wg.Add(1)
		v := append(fmt.Appendf(nil, "%08d", i), val[8:]...)
		cl.Produce(ctx, &kgo.Record{Value: v, Partition: 0}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
}

// record is what a fetch served of one record.
type record struct {
	offset int64
	epoch  int32
	value  string
}

// fetchAll reads topic/0 from its start to its high watermark, through its leader.
func fetchAll(ctx context.Context, t *testing.T, c *cluster, topic string) []record {
	t.Helper()
	adm := kadm.NewClient(c.client())
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var out []record
	for int64(len(out)) < end.Offset && ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(fctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, record{offset: r.Offset, epoch: r.LeaderEpoch, value: string(r.Value[:8])})
		})
	}
	return out
}

func firstDiff(a, b []record) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("record %d: %+v vs %+v", i, a[i], b[i])
		}
	}
	return "one is a prefix of the other"
}

// pullBytes reads sluice_replica_pull_bytes_total from node id's /metrics.
func pullBytes(t *testing.T, c *cluster, id int) int64 {
	t.Helper()
	n, _ := metric(c, id, "sluice_replica_pull_bytes_total")
	return int64(n)
}
