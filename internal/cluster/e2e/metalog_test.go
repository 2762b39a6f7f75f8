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
	var done atomic.Int64
	var wg sync.WaitGroup
	const clients = 8
	for w := range clients {
		wg.Go(func() {
			cl := kadm.NewClient(c.client())
			defer cl.Close()
			group := fmt.Sprintf("g%d", w)
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
				if d := done.Add(1); d%20000 == 0 {
					t.Logf("%d commits, %v", d, time.Since(start).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
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
