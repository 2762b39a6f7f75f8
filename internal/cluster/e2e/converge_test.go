package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
)

// stored is one record of a partition log as a node's data directory holds it.
type stored struct {
	offset int64
	epoch  int32 // the batch's leader epoch: the Raft term of its entry
	value  string
}

// readPartition reads topic/0 of a stopped node from its data directory, whole.
func readPartition(t *testing.T, dir, topic string) []stored {
	t.Helper()
	return readPartitionN(t, dir, topic, 0)
}

// readPartitionN reads topic/part of a stopped node from its data directory, whole.
func readPartitionN(t *testing.T, dir, topic string, part int32) []stored {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(dir, "topics", "*-"+topic, strconv.Itoa(int(part))))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("%s: want one directory of %s/%d, found %v (%v)", dir, topic, part, dirs, err)
	}
	log, err := storage.Open(storage.Options{Dir: dirs[0]})
	if err != nil {
		t.Fatalf("%s: %v", dirs[0], err)
	}
	defer log.Close()
	var out []stored
	for off := log.LogStartOffset(); off < log.HighWatermark(); {
		buf, err := log.Read(off, 1<<20)
		if err != nil || len(buf) == 0 {
			t.Fatalf("%s: read at %d (high watermark %d): %v", dirs[0], off, log.HighWatermark(), err)
		}
		for len(buf) > 0 {
			n, err := batch.FrameSize(buf)
			if err != nil {
				t.Fatalf("%s: %v", dirs[0], err)
			}
			h, _ := batch.ParseHeader(buf[:n])
			i := h.BaseOffset
			for r, err := range batch.Records(buf[:n]) {
				if err != nil {
					t.Fatalf("%s: batch at %d: %v", dirs[0], h.BaseOffset, err)
				}
				out = append(out, stored{offset: i, epoch: h.PartitionLeaderEpoch, value: string(r.Value)})
				i++
			}
			off = h.NextOffset()
			buf = buf[n:]
		}
	}
	return out
}

// checkConverged reads topic/0 from every (stopped) node's data directory and checks
// that the logs are one log, that every acknowledged record is in it once, at the offset
// its acknowledgement gave, and that no term's records were acknowledged by two nodes.
func checkConverged(t *testing.T, c *cluster, topic string, acks []ack) {
	t.Helper()
	logs := make([][]stored, len(c.dirs))
	for i, dir := range c.dirs {
		logs[i] = readPartition(t, dir, topic)
	}
	sameLogs(t, topic+"/0", logs)
	byOffset := map[int64]stored{}
	times := map[string]int{}
	for _, s := range logs[0] {
		byOffset[s.offset] = s
		times[s.value]++
	}
	ackers := map[int32]map[int]bool{} // term -> nodes that acknowledged records of it
	lost, twice := 0, 0
	for _, a := range acks {
		s, ok := byOffset[a.offset]
		switch {
		case !ok || s.value != a.value:
			if lost++; lost <= 5 {
				t.Errorf("%s, acknowledged by node %d at offset %d, is not there (the log has %q)", a.value, a.node, a.offset, s.value)
			}
			continue
		case times[a.value] != 1:
			if twice++; twice <= 5 {
				t.Errorf("%s is in the log %d times", a.value, times[a.value])
			}
		}
		if ackers[s.epoch] == nil {
			ackers[s.epoch] = map[int]bool{}
		}
		ackers[s.epoch][a.node] = true
	}
	if lost+twice > 0 {
		t.Errorf("of %d acknowledged records, %d are not at their offset and %d are stored more than once", len(acks), lost, twice)
	}
	for term, nodes := range ackers {
		if len(nodes) > 1 {
			t.Errorf("records of term %d were acknowledged by nodes %v: two leaders in one term", term, nodes)
		}
	}
	t.Logf("node 1's log: %d records; %d acknowledged; terms with acknowledged writes: %d",
		len(logs[0]), len(acks), len(ackers))
}

// sameLogs reports where a node's log differs from node 1's.
func sameLogs(t *testing.T, what string, logs [][]stored) {
	t.Helper()
	for i := 1; i < len(logs); i++ {
		if !slices.Equal(logs[i], logs[0]) {
			n := min(len(logs[0]), len(logs[i]))
			at := n
			for k := range n {
				if logs[0][k] != logs[i][k] {
					at = k
					break
				}
			}
			t.Errorf("%s: node %d's log (%d records) differs from node 1's (%d) from record %d on", what, i+1, len(logs[i]), len(logs[0]), at)
		}
	}
}

// checkReplicasAgree waits until every node's replica of each partition of topic holds
// as much as the others, stops the nodes, and checks that their logs are one log: same
// records at the same offsets with the same leader epochs. Apply decides on every replica
// (an idempotent producer's retry, a stale marker); a replica that restarted from a
// checkpoint and decided otherwise would hold other records at the offsets consumers
// commit, which reading through the leader alone never shows.
func checkReplicasAgree(ctx context.Context, t *testing.T, c *cluster, topic string, parts int32) {
	t.Helper()
	waitHighWatermarksMeet(ctx, t, c, topic, parts)
	for i := range c.procs {
		c.procs[i].Stop()
	}
	records := 0
	for part := range parts {
		logs := make([][]stored, len(c.dirs))
		for i, dir := range c.dirs {
			logs[i] = readPartitionN(t, dir, topic, part)
		}
		sameLogs(t, fmt.Sprintf("%s/%d", topic, part), logs)
		records += len(logs[0])
	}
	t.Logf("replicas agree: %d records in %d partitions, the same on %d nodes", records, parts, len(c.dirs))
}

// waitHighWatermarksMeet waits up to 30 s until every node's local log of each of topic's
// first parts partitions has the same high watermark as the others'.
func waitHighWatermarksMeet(ctx context.Context, t *testing.T, c *cluster, topic string, parts int32) {
	t.Helper()
	var hws [][]int64
	deadline := time.Now().Add(30 * time.Second)
	for {
		hws = hws[:0]
		for _, p := range c.procs {
			info, err := client.New("http://"+p.Addr("http")).DescribeTopic(ctx, topic)
			row := make([]int64, parts)
			for i := range row {
				row[i] = -1
			}
			if err == nil {
				for _, pi := range info.GetPartitions() {
					if i := pi.GetPartition(); i >= 0 && i < parts {
						row[i] = pi.GetHighWatermark()
					}
				}
			}
			hws = append(hws, row)
		}
		same := !slices.Contains(hws[0], -1)
		for _, row := range hws[1:] {
			same = same && slices.Equal(row, hws[0])
		}
		if same {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("the nodes' high watermarks of %s did not meet: %v", topic, hws)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
