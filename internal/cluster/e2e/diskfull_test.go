package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestNodeWithFullDisk: three real processes, node 3's data directory on a 48 MiB tmpfs
// (the kernel's ENOSPC, not an injected one). A producer (acks=all, franz-go's retries)
// fills it through a partition node 3 leads: node 3 refuses the next records and hands the
// partition to a node with room, so every record is acknowledged all the same; node 3
// stays up, its /readyz answers 503 "storage full" and sluice_raft_disk_full is 1. Then the
// volume grows (a remount, as an operator would): node 3 is ready again on its own, and
// made leader it serves every acknowledged record, in order, from its own log.
func TestNodeWithFullDisk(t *testing.T) {
	vol := testproc.MountTmpfs(t, 48)
	c := startClusterOf(&cluster{t: t, bin: testproc.Build(t, t.TempDir()),
		flags:    []string{"--disk-headroom", "4MiB", "--cluster-leader-balance", "0"},
		nodeDirs: []string{"", "", filepath.Join(vol, "n3")}}, 3, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := c.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopic(ctx, t, adm, "full", 1, 3)
	moveLeader := func(to int) {
		t.Helper()
		for c.leaderOf(ctx, adm, "full", 0) != to {
			if ctx.Err() != nil {
				t.Fatalf("full/0 never moved to node %d", to)
			}
			// Refused while node 3 catches up (not in sync yet): asked again.
			_, _ = c.cliErr(1, "cluster", "transfer-leader", "full", "0", "--to", itoa(to))
			time.Sleep(200 * time.Millisecond)
		}
	}
	moveLeader(3)

	value := make([]byte, 16<<10) // random: the client compresses batches
	rng := rand.New(rand.NewPCG(1, 2))
	acked, fullAt := 0, -1
	var slowest time.Duration              // the producer's pause while the partition moved
	for fullAt < 0 || acked < fullAt+512 { // 8 MiB past the moment node 3 said full
		if acked == 20000 || ctx.Err() != nil {
			t.Fatalf("node 3 never said its disk is full after %d records of 16 KiB (readyz: %s)", acked, c.readyz(3))
		}
		for i := range value {
			value[i] = byte(rng.Uint32())
		}
		rec := &kgo.Record{Topic: "full", Value: append([]byte(fmt.Sprintf("%08d", acked)), value...)}
		began := time.Now()
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("record %d (node 3 full since record %d): %v", acked, fullAt, err)
		}
		slowest = max(slowest, time.Since(began))
		acked++
		if fullAt < 0 && acked%64 == 0 && strings.Contains(c.readyz(3), "storage full") {
			fullAt = acked
		}
	}
	t.Logf("node 3 said full after %d records; %d acknowledged in all; the slowest took %v", fullAt, acked, slowest)
	if l := c.leaderOf(ctx, adm, "full", 0); l == 3 {
		t.Fatal("node 3 still leads full/0 with its disk full")
	}
	if got := c.readyz(3); !strings.HasPrefix(got, "503") || !strings.Contains(got, "storage full") {
		t.Fatalf("node 3's /readyz with its disk full: %s", got)
	}
	waitFor(ctx, t, "sluice_raft_disk_full 1 on node 3", func() bool {
		v, ok := metric(c, 3, "sluice_raft_disk_full")
		return ok && v == 1
	})

	testproc.ResizeTmpfs(t, vol, 160)
	waitFor(ctx, t, "node 3 ready once its volume grew", func() bool { return strings.HasPrefix(c.readyz(3), "200") })
	moveLeader(3)
	cons := c.client(kgo.ConsumeTopics("full"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cons.Close()
	for next := 0; next < acked; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming from node 3 after record %d: %v", next, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("%08d", next); string(r.Value[:8]) != want {
				t.Fatalf("record at offset %d is %s, want %s", r.Offset, r.Value[:8], want)
			}
			next++
		})
	}
	if l := c.leaderOf(ctx, adm, "full", 0); l != 3 {
		t.Fatalf("full/0 moved to node %d while it was read", l)
	}
}

// readyz is node id's /readyz answer, "<status> <body>", or why there is none.
func (c *cluster) readyz(id int) string {
	resp, err := http.Get("http://" + c.procs[id-1].Addr("http") + "/readyz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}

// waitFor polls cond every 100 ms until it holds or ctx ends (then the test fails).
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
