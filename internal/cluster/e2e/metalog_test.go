package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestMetadataLogGrowth is a measurement run by hand (docs/cluster.md, "Consumer groups",
// "Compaction"), not a CI test: SLUICE_META_COMMITS=N commits N consumer-group offsets
// through Kafka on three real nodes (8 clients in parallel, each its own group) and reports
// each node's metadata Raft log on disk. SLUICE_META_BUILD=<commit> runs the nodes of that
// older commit instead, for the figure before feature level 3 (when the log was never
// compacted once offsets flowed). With this build the log must stay within a few of its
// 16 MiB segments whatever N; the test fails if it holds more than four.
//
//	SLUICE_META_COMMITS=200000 go test -count=1 -v -run MetadataLogGrowth ./internal/cluster/e2e/
func TestMetadataLogGrowth(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SLUICE_META_COMMITS"))
	if n <= 0 {
		t.Skip("a measurement by hand: set SLUICE_META_COMMITS (see the comment)")
	}
	c := &cluster{t: t}
	if commit := os.Getenv("SLUICE_META_BUILD"); commit != "" {
		c.bin = testproc.BuildAt(t, t.TempDir(), commit)
	} else {
		c.bin = testproc.Build(t, t.TempDir())
	}
	startClusterOf(c, 3, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "t", 1, 3)
	if os.Getenv("SLUICE_META_BUILD") == "" {
		c.awaitStatus(ctx, t, 1, "the newest feature level", func(st broker.ClusterStatus) bool { return st.FeatureLevel == meta.MaxFeatureLevel })
	}
	start := time.Now()
	commitOffsets(ctx, t, c, n, "g", start)
	elapsed := time.Since(start)
	time.Sleep(2 * time.Second) // a snapshot and its compaction run in the Ready loop
	worst := int64(0)
	for i, dir := range c.dirs {
		size, files := metaLogSize(t, dir)
		worst = max(worst, size)
		t.Logf("node %d: metadata log %.1f MiB in %d files", i+1, float64(size)/(1<<20), files)
	}
	t.Logf("%d commits in %v (%.0f/s)", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	if os.Getenv("SLUICE_META_BUILD") == "" && worst > 4*16<<20 {
		t.Fatalf("a metadata log of %.1f MiB after %d commits: not compacted", float64(worst)/(1<<20), n)
	}
}

// commitOffsets commits n offsets of partition 0 of topic "t" through Kafka, from 8 clients
// in parallel, client w as group prefix+w (offsets ascending), and returns each group's
// last acknowledged offset. A commit refused (a failover) is retried until ctx ends.
func commitOffsets(ctx context.Context, t *testing.T, c *cluster, n int, prefix string, start time.Time) map[string]int64 {
	t.Helper()
	const clients = 8
	var mu sync.Mutex
	last := map[string]int64{}
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			cl := kadm.NewClient(c.client())
			defer cl.Close()
			group := fmt.Sprintf("%s%d", prefix, w)
			for i := w; i < n; i += clients {
				offs := kadm.Offsets{}
				offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: int64(i), LeaderEpoch: -1})
				for {
					resp, err := cl.CommitOffsets(ctx, group, offs)
					if err == nil {
						err = resp.Error()
					}
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						t.Errorf("commit %d: %v", i, err)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				mu.Lock()
				last[group] = int64(i)
				mu.Unlock()
				if d := done.Add(1); d%20000 == 0 {
					t.Logf("%d commits, %v", d, time.Since(start).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
	return last
}

// metaLogSize is the size and file count of the metadata group's Raft log under a node's
// data directory (raft/g00000000000000000001/log).
func metaLogSize(t *testing.T, dataDir string) (size int64, files int) {
	t.Helper()
	dir := filepath.Join(dataDir, "raft", fmt.Sprintf("g%020d", meta.Group), "log")
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size, files = size+info.Size(), files+1
		return nil
	})
	if err != nil {
		t.Fatalf("metadata log of %s: %v", dataDir, err)
	}
	return size, files
}

// TestFollowerRestartedPastCompactedMetadataLog (docs/cluster.md, "Consumer groups",
// "Compaction"): three real nodes; a follower of the metadata group is SIGKILLed while a
// group is deleted and 30,000 offsets are committed, past a metadata snapshot (every 10,000
// entries) and the compaction behind it. Restarted, it is sent a snapshot (its
// raft_snapshots_restored counter rises) and must hold, in its own replicated state as the
// native API reads it on that node, every group's last acknowledged offset and not the
// deleted group; again after a second SIGKILL and restart from its own disk.
func TestFollowerRestartedPastCompactedMetadataLog(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.awaitStatus(ctx, t, 1, "the newest feature level", func(st broker.ClusterStatus) bool {
		return st.FeatureLevel == meta.MaxFeatureLevel && st.Controller != 0
	})
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "t", 1, 3)
	commitOffsets(ctx, t, c, 8, "g", time.Now())
	gone := kadm.Offsets{}
	gone.Add(kadm.Offset{Topic: "t", Partition: 0, At: 7, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "gone", gone); err != nil {
		t.Fatal(err)
	}
	ctl := agreedController(ctx, t, c, 0)
	lagging := ctl%3 + 1
	holds := func(group string) (map[int32]int64, bool) {
		d, err := c.native(lagging).DescribeGroup(ctx, group)
		if err != nil {
			return nil, false
		}
		offs := map[int32]int64{}
		for _, p := range d.GetPartitions() {
			if p.GetCommittedOffset() >= 0 {
				offs[p.GetPartition()] = p.GetCommittedOffset()
			}
		}
		return offs, len(offs) > 0
	}
	await := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("node %d: %s: never", lagging, what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	await("holds the group to delete", func() bool { _, ok := holds("gone"); return ok })
	c.kill(lagging)
	t.Logf("controller node %d; node %d killed", ctl, lagging)

	if resp, err := adm.DeleteGroups(ctx, "gone"); err != nil || resp.Error() != nil {
		t.Fatalf("delete group: %v %v", err, resp.Error())
	}
	start := time.Now()
	const commits = 30_000
	last := commitOffsets(ctx, t, c, commits, "g", start)
	t.Logf("%d commits in %v while node %d was down", commits, time.Since(start).Round(time.Millisecond), lagging)

	check := func(when string) {
		t.Helper()
		await(when+": every group at its last acknowledged offset", func() bool {
			for g, want := range last {
				if offs, _ := holds(g); offs[0] != want {
					return false
				}
			}
			return true
		})
		if offs, ok := holds("gone"); ok {
			t.Fatalf("%s: node %d holds the deleted group's offsets %v", when, lagging, offs)
		}
		gs, err := c.native(lagging).ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			if g.GetGroup() == "gone" {
				t.Fatalf("%s: node %d lists the deleted group", when, lagging)
			}
		}
	}
	c.start(lagging)
	c.procs[lagging-1].Addr("kafka")
	await("restores a snapshot of the metadata group", func() bool {
		v, ok := metric(c, lagging, "sluice_raft_snapshots_restored_total")
		return ok && v > 0
	})
	check("after the snapshot")
	c.kill(lagging)
	c.start(lagging)
	c.procs[lagging-1].Addr("kafka")
	check("after a second kill")
}
